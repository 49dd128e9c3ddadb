//! A skillcat catalog over HTTP, as a `skillcat-core` [`SkillDiscoverer`](skillcat_core::SkillDiscoverer).
//!
//! [`RemoteSkillDiscoverer`] speaks to a `skillcat serve` and implements the same protocol as
//! the local discoverers, so an agent can use a remote catalog alone or inside a
//! [`CompositeSkillDiscoverer`](skillcat_core::CompositeSkillDiscoverer) next to local
//! directories (the first source to name a skill wins).
//!
//! ```
//! # use std::net::SocketAddr;
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let shared = tempfile::tempdir()?;
//! # std::fs::create_dir(shared.path().join("greet"))?;
//! # std::fs::write(shared.path().join("greet/SKILL.md"), "---\nname: greet\ndescription: Greets people.\n---\nSay hello.\n")?;
//! # let sources = vec![skillcat::config::SourceConfig::directory(shared.path())];
//! # let options = skillcat::server::ServeOptions::new(SocketAddr::from(([127, 0, 0, 1], 0)), sources);
//! # let server = skillcat::server::Server::bind(options).await?;
//! # let url = format!("http://{}", server.local_addr()?);
//! # let live = server.app().catalog.clone();
//! # tokio::spawn(server.run(std::future::pending()));
//! # live.ready().await;
//! # let mine = tempfile::tempdir()?;
//! # std::fs::create_dir(mine.path().join("greet"))?;
//! # std::fs::write(mine.path().join("greet/SKILL.md"), "---\nname: greet\ndescription: My greeting.\n---\nSay hi.\n")?;
//! # let my_skills = mine.path();
//! use std::sync::Arc;
//!
//! use skillcat_client::{RemoteSkillDiscoverer, RetryPolicy};
//! use skillcat_core::{CompositeSkillDiscoverer, DirectorySkillDiscoverer, SkillDiscoverer, TokenLimit};
//!
//! // `url` is a running `skillcat serve`, such as "http://127.0.0.1:8080".
//! let remote = RemoteSkillDiscoverer::new(&url)?;
//! let skills = remote.discover().await?;
//! assert_eq!(skills[0].name().as_str(), "greet");
//! assert!(remote.load(&skills[0]).await?.contains("Say hello."));
//! let budgeted = remote.load_budgeted(&skills[0], TokenLimit::new(4)?).await?;
//! assert!(budgeted.truncated);
//!
//! // Configured, in watch mode, after a local directory that takes precedence.
//! let remote = RemoteSkillDiscoverer::builder(&url)
//!     .retry_policy(RetryPolicy::new(2, std::time::Duration::from_millis(50), std::time::Duration::from_secs(1)))
//!     .watch(true)
//!     .build()?;
//! let local = DirectorySkillDiscoverer::new([my_skills])?;
//! let sources: Vec<Arc<dyn SkillDiscoverer>> = vec![Arc::new(local), Arc::new(remote)];
//! let composite = CompositeSkillDiscoverer::new(sources);
//! let skills = composite.discover().await?;
//! assert_eq!(skills[0].description(), "My greeting.");
//! assert!(composite.load(&skills[0]).await?.contains("Say hi."));
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

mod catalog;
mod config;
mod discoverer;
mod error;
mod retry;
mod shared;
mod watch;

pub use catalog::{RemoteCatalog, RemoteDiagnostic, RemoteSkill, ShadowedSkill};
pub use config::{BearerToken, Builder, InvalidToken, RetryPolicy};
pub use discoverer::RemoteSkillDiscoverer;
pub use error::{ClientError, Problem};
pub use reqwest;

#[cfg(test)]
mod fake;
