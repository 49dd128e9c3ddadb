# syntax=docker/dockerfile:1
#
# The skillcat server image. From the repository root:
#
#   docker build -t skillcat:0.1.0 .
#   docker run --rm -p 8080:8080 --read-only -v "$PWD/my-skills:/skills:ro" skillcat:0.1.0
#
# It serves the skills mounted at /skills (a missing folder is fine: it is logged, watched and
# picked up once created), and not the builtin skills: they are about skillcat itself, and every
# agent's prompt would pay for their two manifest entries. `serve --dir /skills` as the command
# serves them too. Other flags go after `serve`, or through the SKILLCAT_* environment variables
# (`skillcat serve --help`). The image runs as a numeric non-root user and writes nothing, so it
# runs on a read-only root filesystem. A git source (`serve --git URL`) is the exception: its
# mirror lives under `--state-dir` (env SKILLCAT_STATE_DIR), which must then be a writable volume.
# There is no git or ssh binary: the server fetches https, http and git:// itself, and ssh:// URLs
# are not supported here (use https with a token).
#
# Base images are pinned by tag and digest; bump both together (`docker buildx imagetools
# inspect IMAGE:TAG` prints the digest).

# Build: the official Rust image on Debian bookworm, the same glibc as the runtime below.
FROM rust:1.95.0-slim-bookworm@sha256:d7482085ff5b415f84dba5647ae71606650bdef00db7aeb69f4b3d170c3e4082 AS build
WORKDIR /src
# Only what the build reads (the builtin skills are embedded into the binary).
COPY Cargo.toml Cargo.lock build.rs ./
COPY crates crates
COPY src src
COPY skills skills
# The registry and the target folder are BuildKit caches: a rebuild after a source change
# recompiles skillcat, not its dependencies.
RUN --mount=type=cache,id=skillcat-cargo-registry,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,id=skillcat-target,target=/src/target,sharing=locked \
    cargo build --release --locked -p skillcat \
    && install -D -m 0755 target/release/skillcat /out/skillcat

# Runtime: distroless with glibc and libgcc (the binary is dynamically linked against them);
# no shell, no package manager.
FROM gcr.io/distroless/cc-debian12:nonroot@sha256:9dac0a79194e45a7da0158a9c6da57b217585af0786db3845d1f0ec1a0dd182f AS runtime
LABEL org.opencontainers.image.title="skillcat" \
      org.opencontainers.image.description="An HTTP skill-catalog service for LLM agents" \
      org.opencontainers.image.licenses="MIT OR Apache-2.0"
COPY --from=build /out/skillcat /usr/local/bin/skillcat
ENV SKILLCAT_LISTEN=0.0.0.0:8080
# distroless's nonroot user, by number, so that runAsNonRoot can be checked without /etc/passwd.
USER 65532:65532
EXPOSE 8080
# `skillcat health` GETs /healthz on the SKILLCAT_LISTEN port (0.0.0.0 means this host's loopback).
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 CMD ["/usr/local/bin/skillcat", "health"]
ENTRYPOINT ["/usr/local/bin/skillcat"]
CMD ["serve", "--dir", "/skills", "--no-builtin"]
