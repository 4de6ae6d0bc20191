//! What every request handler shares: [`AppState`] (the engine, the authentication service, the
//! UI's backend port and options) and the [`Shutdown`] signal that tells long-lived responses
//! the server is stopping. It sits below every handler module (`api`, `gateway`, `ops`, the
//! request guard and the web layer), so they depend on it and never on the router.

use crate::{
    auth::{Auth, AuthSettings},
    backend::EngineBackend,
    clock::ManualClock,
    engine::Engine,
};
use app::backend::Backend;
use axum::extract::FromRef;
use leptos::config::LeptosOptions;
use std::sync::Arc;
use tokio::sync::watch;

/// Everything a request handler may need. Cheap to clone: everything is shared.
#[derive(Clone)]
pub struct AppState {
    pub leptos: LeptosOptions,
    pub engine: Arc<Engine>,
    pub backend: Arc<dyn Backend>,
    /// Set only by `recourse serve --test-clock` and tests: enables `POST /api/v1/test/clock`.
    pub test_clock: Option<ManualClock>,
    /// Fires when the server begins to stop.
    pub shutdown: Shutdown,
    /// Accounts, sessions, tokens, permissions and the audit log.
    pub auth: Auth,
}

impl AppState {
    pub fn new(engine: Arc<Engine>, leptos: LeptosOptions, test_clock: Option<ManualClock>) -> AppState {
        let auth = Auth::new(
            engine.store().clone(),
            engine.clock().clone(),
            AuthSettings::default(),
        );
        AppState {
            leptos,
            backend: Arc::new(EngineBackend::new(engine.clone(), auth.clone())),
            engine,
            test_clock,
            shutdown: Shutdown::new(),
            auth,
        }
    }

    /// The same state with these authentication settings (`serve`'s flags; tests' limits).
    pub fn with_auth(mut self, settings: AuthSettings) -> AppState {
        self.auth = Auth::new(self.engine.store().clone(), self.engine.clock().clone(), settings);
        self.backend = Arc::new(EngineBackend::new(self.engine.clone(), self.auth.clone()));
        self
    }
}

/// "The server is stopping", for responses that would otherwise never end. Cheap to clone;
/// every clone sees the same signal.
#[derive(Clone, Debug)]
pub struct Shutdown {
    tx: Arc<watch::Sender<bool>>,
}

impl Shutdown {
    pub fn new() -> Shutdown {
        Shutdown {
            tx: Arc::new(watch::channel(false).0),
        }
    }

    /// Says the server is stopping (idempotent).
    pub fn trigger(&self) {
        self.tx.send_replace(true);
    }

    /// Resolves once [`Shutdown::trigger`] was called (at once if it already was).
    pub async fn wait(&self) {
        let mut rx = self.tx.subscribe();
        let _ = rx.wait_for(|stopping| *stopping).await;
    }
}

impl Default for Shutdown {
    fn default() -> Self {
        Shutdown::new()
    }
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos.clone()
    }
}
