//! The JobManager's HTTP port: the REST API under `/v1` with its OpenAPI document, the web
//! dashboard at `/`, Prometheus metrics at `/metrics`, and `/health`.

mod api;
mod dashboard;
mod metrics;
pub mod model;

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use eddy_common::metrics::exposition;
use eddy_proto::auth::http_guard;
use eddy_proto::http_listener::HttpListener;
use utoipa::OpenApi;

pub use api::ApiDoc;

use crate::manager::JobManager;

/// The largest request body taken (a SQL script and its options): larger ones get 413.
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// The routes of the JobManager's HTTP port: the API and `/metrics` for holders of a token
/// when the JobManager demands tokens (a read-only one for `GET`); the dashboard's files
/// and `/health` for everyone (the dashboard asks for a token when the API wants one).
pub fn router(jm: Arc<JobManager>) -> Router {
    let guard = jm.config().guard.clone();
    let v1 = Router::new()
        .route("/jobs", get(api::list_jobs).post(api::submit_job))
        .route("/jobs/{id}", get(api::get_job).delete(api::cancel))
        .route("/jobs/{id}/checkpoints", get(api::checkpoints))
        .route("/jobs/{id}/savepoints", post(api::savepoint))
        .route("/jobs/{id}/stop", post(api::stop))
        .route("/taskmanagers", get(api::taskmanagers))
        .route("/leader", get(api::leader))
        .route("/openapi.json", get(openapi))
        .fallback(api::not_found);
    let guarded = Router::new()
        .nest("/v1", v1)
        .route("/metrics", get(prometheus))
        .layer(axum::middleware::from_fn_with_state(guard, http_guard));
    Router::new()
        .merge(guarded)
        .route("/health", get(|| async { "ok\n" }))
        .merge(dashboard::routes())
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(jm)
}

/// Serves the HTTP port on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: HttpListener,
    jm: Arc<JobManager>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(jm))
        .with_graceful_shutdown(shutdown)
        .await
}

async fn prometheus(State(jm): State<Arc<JobManager>>) -> impl IntoResponse {
    (
        [(CONTENT_TYPE, exposition::CONTENT_TYPE)],
        metrics::render(&jm),
    )
}

async fn openapi() -> impl IntoResponse {
    (
        [(CONTENT_TYPE, "application/json")],
        ApiDoc::openapi().to_pretty_json().unwrap_or_default(),
    )
}
