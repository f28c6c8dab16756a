//! The web dashboard: one page and its script and style, compiled into the binary (no
//! separate server, nothing fetched at runtime). The page reads the REST API and refreshes
//! itself.

use std::sync::Arc;

use axum::Router;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::manager::JobManager;

const INDEX: &str = include_str!("dashboard/index.html");
const SCRIPT: &str = include_str!("dashboard/dashboard.js");
const STYLE: &str = include_str!("dashboard/dashboard.css");

/// `/` and the dashboard's assets.
pub fn routes() -> Router<Arc<JobManager>> {
    Router::new()
        .route(
            "/",
            get(|| async { asset("text/html; charset=utf-8", INDEX) }),
        )
        .route(
            "/dashboard.js",
            get(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }),
        )
        .route(
            "/dashboard.css",
            get(|| async { asset("text/css; charset=utf-8", STYLE) }),
        )
}

fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [(CONTENT_TYPE, content_type), (CACHE_CONTROL, "no-cache")],
        body,
    )
}
