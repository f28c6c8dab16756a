//! A TaskManager's HTTP port: `GET /metrics` (Prometheus text format) and `GET /health`.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;
use eddy_common::metrics::exposition;
use eddy_proto::auth::{Guard, http_guard};

use crate::node::TaskManager;

/// The routes of a TaskManager's HTTP port: `/metrics` for holders of a token when
/// `guard` demands one, `/health` for everyone.
pub fn router(node: Arc<TaskManager>, guard: Guard) -> Router {
    let metrics = Router::new()
        .route("/metrics", get(metrics))
        .layer(axum::middleware::from_fn_with_state(guard, http_guard));
    Router::new()
        .merge(metrics)
        .route("/health", get(|| async { "ok\n" }))
        .with_state(node)
}

async fn metrics(State(node): State<Arc<TaskManager>>) -> impl IntoResponse {
    (
        [(CONTENT_TYPE, exposition::CONTENT_TYPE)],
        crate::metrics::render(&node),
    )
}
