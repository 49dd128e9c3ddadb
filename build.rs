//! Links the `skillcat` binary with packed relative relocations (DT_RELR) where the toolchain and
//! the C library both support them (GNU ld 2.38 or lld 15, and glibc 2.36).
//!
//! A position-independent binary carries one relocation record (24 bytes) per pointer in its
//! data, and the dynamic loader reads the whole table at every start: about 1 MB for skillcat,
//! every page of it resident for the life of the process. Packed, the same relocations take about
//! 16 KB. The binary stays position-independent (its address randomised at every start).
//!
//! The support is probed by linking and running a small program with the option: a linker that
//! does not know it warns, and a C library that does not know DT_RELR refuses to load
//! the program (its `GLIBC_ABI_DT_RELR` version is missing). Either way, and when the build is
//! for another machine than the one it runs on, the binary is linked as before.

use std::path::Path;
use std::process::{Command, Stdio};

const OPTION: &str = "-Wl,-z,pack-relative-relocs";

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=RUSTC_LINKER");
    let target = |key: &str| std::env::var(key).unwrap_or_default();
    let native = target("HOST") == target("TARGET");
    if native && target("CARGO_CFG_TARGET_OS") == "linux" && target("CARGO_CFG_TARGET_ENV") == "gnu" {
        let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
        if packs_relocations(Path::new(&out)) {
            println!("cargo::rustc-link-arg-bins={OPTION}");
        }
    }
}

/// Whether a program linked with [`OPTION`] by the linker rustc uses links and runs.
fn packs_relocations(out: &Path) -> bool {
    // A pointer in its data: one relative relocation, which the option packs.
    let source = out.join("relr-probe.c");
    let program = out.join("relr-probe");
    let text = "static int value;\nint *volatile pointer = &value;\nint main(void) { return *pointer; }\n";
    if std::fs::write(&source, text).is_err() {
        return false;
    }
    let linker = std::env::var("RUSTC_LINKER").unwrap_or_else(|_| "cc".to_owned());
    // GNU ld and lld ignore a `-z` keyword they do not know, with a warning: the link must be silent.
    let linked = Command::new(linker)
        .arg(&source)
        .arg("-o")
        .arg(&program)
        .arg(OPTION)
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|output| output.status.success() && output.stderr.is_empty());
    linked && Command::new(&program).stderr(Stdio::null()).status().is_ok_and(|status| status.success())
}
