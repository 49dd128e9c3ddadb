//! Lists a remote skill catalog: its skills, the skills its sources shadow, and its diagnostics.
//!
//! ```text
//! cargo run -p skillcat-client --example list -- http://127.0.0.1:8080
//! ```
//!
//! A bearer token, if the server needs one, is read from `SKILLCAT_TOKEN`.

use std::process::ExitCode;

use skillcat_client::{BearerToken, ClientError, RemoteSkillDiscoverer};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let url = std::env::args().nth(1).unwrap_or_else(|| "http://127.0.0.1:8080".to_owned());
    match list(&url).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn list(url: &str) -> Result<(), Box<dyn std::error::Error>> {
    let mut builder = RemoteSkillDiscoverer::builder(url);
    if let Ok(token) = std::env::var("SKILLCAT_TOKEN") {
        builder = builder.bearer_token(BearerToken::new(token)?);
    }
    let remote = builder.build()?;
    let catalog = match remote.catalog().await {
        Ok(catalog) => catalog,
        Err(ClientError::Unavailable(problem)) => {
            return Err(format!("the catalog is unavailable: {}", problem.detail).into());
        }
        Err(error) => return Err(error.into()),
    };
    println!("{} skills (catalog {})", catalog.skills().len(), catalog.etag());
    for entry in catalog.entries() {
        println!("  {:<28} {}", entry.skill.name(), entry.skill.description());
        println!("  {:<28} {} [{}]", "", entry.skill.location(), entry.source);
    }
    if !catalog.shadowed().is_empty() {
        println!("shadowed:");
        for shadowed in catalog.shadowed() {
            println!("  {:<28} {} [{}]", shadowed.name, shadowed.location, shadowed.source);
        }
    }
    if !catalog.diagnostics().is_empty() {
        println!("diagnostics:");
        for diagnostic in catalog.diagnostics() {
            println!("  [{}] {}", diagnostic.source, diagnostic.message);
        }
    }
    Ok(())
}
