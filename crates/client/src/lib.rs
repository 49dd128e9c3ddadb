//! A skillcat catalog over HTTP, as a `skillcat-core` [`SkillDiscoverer`](skillcat_core::SkillDiscoverer).
//!
//! [`RemoteSkillDiscoverer`] speaks to a `skillcat serve` and implements the same protocol as
//! the local discoverers, so an agent can use a remote catalog alone or inside a
//! [`CompositeSkillDiscoverer`](skillcat_core::CompositeSkillDiscoverer) next to local
//! directories (the first source to name a skill wins).
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use skillcat_client::{RemoteSkillDiscoverer, RetryPolicy};
//! use skillcat_core::{CompositeSkillDiscoverer, DirectorySkillDiscoverer, SkillDiscoverer, TokenLimit};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // A running `skillcat serve`.
//! let url = "http://127.0.0.1:8080";
//! let remote = RemoteSkillDiscoverer::new(url)?;
//! for skill in remote.discover().await? {
//!     let content = remote.load(&skill).await?;
//!     let budgeted = remote.load_budgeted(&skill, TokenLimit::new(500)?).await?;
//!     println!("{}: {} bytes, {} within 500 tokens", skill.name(), content.len(), budgeted.content.len());
//! }
//!
//! // Configured, in watch mode, after a local directory that takes precedence.
//! let remote = RemoteSkillDiscoverer::builder(url)
//!     .retry_policy(RetryPolicy::new(2, Duration::from_millis(50), Duration::from_secs(1)))
//!     .watch(true)
//!     .build()?;
//! let local = DirectorySkillDiscoverer::new(["~/skills"])?;
//! let sources: Vec<Arc<dyn SkillDiscoverer>> = vec![Arc::new(local), Arc::new(remote)];
//! let composite = CompositeSkillDiscoverer::new(sources);
//! for skill in composite.discover().await? {
//!     println!("{}: {}", skill.name(), skill.description());
//! }
//! # Ok(())
//! # }
//! ```
//!
//! A skill is also a folder: [`files`](RemoteSkillDiscoverer::files) lists it (every path checked
//! as a [`SkillFilePath`](skillcat_core::SkillFilePath)), [`read_file`](RemoteSkillDiscoverer::read_file)
//! returns a file's bytes only if their size and SHA-256 are the listed ones, and
//! [`download`](RemoteSkillDiscoverer::download) writes the folder into a local one, all or
//! nothing (a staging folder beside the target, then one rename).
//!
//! ```no_run
//! # use skillcat_client::RemoteSkillDiscoverer;
//! # use skillcat_core::SkillDiscoverer;
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let remote = RemoteSkillDiscoverer::new("http://127.0.0.1:8080")?;
//! let skill = remote.discover().await?.remove(0);
//! let done = remote.download(&skill, format!(".agents/skills/{}", skill.name()), false).await?;
//! println!("{} files, {} bytes", done.files, done.bytes);
//! # Ok(())
//! # }
//! ```
//!
//! A skill can be pinned to a version (a `sha256:` digest of its folder, a commit id or a tag),
//! by hand or from a lock file as `skillcat download --lock` writes it: it is then discovered,
//! loaded, listed and downloaded at that version only, every answer checked against the
//! version's digest, and a version the server lacks is [`ClientError::VersionNotFound`] naming
//! the skill and version, never the current version instead.
//!
//! ```no_run
//! # use skillcat_client::{installed_version, RemoteSkillDiscoverer};
//! # use skillcat_core::{SkillDiscoverer, SkillName};
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let remote = RemoteSkillDiscoverer::builder("http://127.0.0.1:8080")
//!     .lock_file("skills.lock")
//!     .pin(SkillName::parse("pdf")?, "v1.2.0")
//!     .build()?;
//! for skill in remote.discover().await? {
//!     let content = remote.load(&skill).await?; // the pinned version's, checked
//!     println!("{}: {} bytes", skill.name(), content.len());
//! }
//! // An installed folder's version, as the server computes it from its listing.
//! println!("{}", installed_version(".agents/skills/pdf")?);
//! # Ok(())
//! # }
//! ```
//!
//! Errors: the inherent methods ([`RemoteSkillDiscoverer::catalog`],
//! [`content`](RemoteSkillDiscoverer::content), [`load_budgeted`](RemoteSkillDiscoverer::load_budgeted))
//! answer a [`ClientError`] keyed on the server's status and carrying its problem document; the
//! [`SkillDiscoverer`](skillcat_core::SkillDiscoverer) methods map it into
//! [`SkillError`](skillcat_core::SkillError), stale descriptors to errors whose
//! [`is_stale`](skillcat_core::SkillError::is_stale) holds.
//!
//! The `rustls` feature lets the client this crate makes speak HTTPS; otherwise inject a
//! configured [`reqwest::Client`] with [`Builder::client`].

#![forbid(unsafe_code)]

mod catalog;
mod config;
mod discoverer;
mod download;
mod error;
mod files;
mod install;
mod installed;
mod lock;
mod pinned;
mod retry;
mod search;
mod shared;
mod watch;

pub use catalog::{CatalogFailure, RemoteCatalog, RemoteDiagnostic, RemoteSkill, ShadowedSkill};
pub use config::{BearerToken, Builder, InvalidToken, RetryPolicy};
pub use discoverer::RemoteSkillDiscoverer;
pub use download::Downloaded;
pub use error::{ClientError, Problem};
pub use files::{RemoteFile, RemoteFileListing, SkippedFile};
pub use installed::{FolderError, installed_version};
pub use lock::{Lock, LockError, LockedSkill};
pub use reqwest;
pub use search::{ExcerptPart, MAX_SEARCH_LIMIT, SearchHit, SearchResults};

#[cfg(test)]
mod fake;
