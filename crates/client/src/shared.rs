//! What a discoverer and its watch task share: the settings, the last catalog the server answered
//! and what the event stream last announced.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use reqwest::header::{ACCEPT, ETAG, HeaderValue, IF_NONE_MATCH};
use reqwest::{Method, StatusCode};
use skillcat_core::Skill;

use crate::catalog::RemoteCatalog;
use crate::config::Settings;
use crate::error::ClientError;
use crate::retry;

pub(crate) struct Shared {
    pub settings: Settings,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The last catalog the server answered.
    catalog: Option<Arc<RemoteCatalog>>,
    /// While the event stream is up and has spoken: the tag of the catalog it last announced
    /// (`Some(None)`: the catalog is unavailable or the event was not understood).
    announced: Option<Option<String>>,
}

/// Locks `mutex`; a panic while it was held leaves nothing half-done worth refusing.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    pub(crate) fn new(settings: Settings) -> Self {
        Shared { settings, state: Mutex::default() }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// The last catalog the server answered.
    pub(crate) fn cached(&self) -> Option<Arc<RemoteCatalog>> {
        self.state().catalog.clone()
    }

    /// The cached catalog, if the live event stream vouches that it is the current one.
    pub(crate) fn vouched(&self) -> Option<Arc<RemoteCatalog>> {
        let state = self.state();
        match (&state.announced, &state.catalog) {
            (Some(Some(etag)), Some(catalog)) if etag == catalog.etag() => Some(Arc::clone(catalog)),
            _ => None,
        }
    }

    /// Records what the event stream said: `Some(tag)` for an event, `None` when it went down.
    pub(crate) fn announce(&self, announced: Option<Option<String>>) {
        self.state().announced = announced;
    }

    /// `GET /skills`, conditional on the cached catalog's tag.
    pub(crate) async fn fetch_catalog(&self) -> Result<Arc<RemoteCatalog>, ClientError> {
        let cached = self.cached();
        let settings = &self.settings;
        let response = retry::send(settings, || {
            let request =
                settings.request(Method::GET, settings.endpoints.skills.clone()).header(ACCEPT, "application/json");
            match &cached {
                Some(catalog) => request.header(IF_NONE_MATCH, catalog.validator().clone()),
                None => request,
            }
        })
        .await?;
        match response.status() {
            StatusCode::NOT_MODIFIED => {
                cached.ok_or_else(|| ClientError::InvalidResponse("304 to an unconditional GET /skills".into()))
            }
            StatusCode::OK => {
                let etag = response.headers().get(ETAG).cloned();
                let body = response.bytes().await.map_err(ClientError::Transport)?;
                let catalog = Arc::new(RemoteCatalog::parse(&body, etag.as_ref())?);
                self.state().catalog = Some(Arc::clone(&catalog));
                Ok(catalog)
            }
            _ => Err(ClientError::from_response(response, None).await),
        }
    }

    /// The tag of `skill` if it is the last discovery's descriptor of that name.
    pub(crate) fn current_tag(&self, skill: &Skill) -> Result<HeaderValue, ClientError> {
        let state = self.state();
        let entry = state.catalog.as_ref().and_then(|catalog| catalog.get(skill.name().as_str()));
        match entry {
            Some(entry) if entry.skill == *skill => HeaderValue::from_str(&entry.etag)
                .map_err(|_| ClientError::InvalidResponse(format!("bad tag for skill '{}'", skill.name()))),
            _ => Err(ClientError::NotInCatalog { name: skill.name().clone() }),
        }
    }
}
