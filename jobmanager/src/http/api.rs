//! The REST API (`/v1/...`): the JobService's calls as JSON, errors as JSON with the HTTP
//! status that fits, and its OpenAPI document made from these handlers.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Extension, FromRequest, Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use eddy_proto::auth::Principal;
use utoipa::OpenApi;

use super::model::{
    ApiErrorBody, Checkpoint, JobDetail, JobSummary, Leader, Savepoint, StopJob, Stopped,
    SubmitJob, Submitted, TaskManager,
};
use crate::error::JobManagerError;
use crate::manager::JobManager;

/// An error answer: a status and a message, sent as [`ApiErrorBody`].
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    /// An error with `status`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
        }
    }
}

impl From<JobManagerError> for ApiError {
    fn from(error: JobManagerError) -> Self {
        let status = match &error {
            JobManagerError::NoSuchJob(_) | JobManagerError::UnknownTaskManager(_) => {
                StatusCode::NOT_FOUND
            }
            JobManagerError::WrongState { .. }
            | JobManagerError::NotCheckpointing
            | JobManagerError::Stopping
            | JobManagerError::SavepointAborted => StatusCode::CONFLICT,
            JobManagerError::InvalidJob(_) | JobManagerError::BadMessage(_) => {
                StatusCode::BAD_REQUEST
            }
            JobManagerError::Refused(_) => StatusCode::FORBIDDEN,
            JobManagerError::SavepointFailed(_) => StatusCode::INTERNAL_SERVER_ERROR,
            JobManagerError::SavepointTimedOut => StatusCode::GATEWAY_TIMEOUT,
        };
        ApiError::new(status, error.to_string())
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        // 413 for a body over the limit, 400/415/422 for one that is not the JSON asked.
        ApiError::new(rejection.status(), rejection.body_text())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ApiErrorBody {
            error: self.message,
            status: self.status.as_u16(),
        };
        (self.status, Json(body)).into_response()
    }
}

/// A JSON request body whose rejections answer as [`ApiError`]s.
pub struct JsonBody<T>(pub T);

impl<T, S> FromRequest<S> for JsonBody<T>
where
    Json<T>: FromRequest<S, Rejection = JsonRejection>,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let Json(value) = Json::<T>::from_request(request, state).await?;
        Ok(JsonBody(value))
    }
}

type Jm = State<Arc<JobManager>>;

/// Every job, newest first.
#[utoipa::path(get, path = "/v1/jobs", tag = "jobs",
    responses((status = 200, body = [JobSummary])))]
pub async fn list_jobs(State(jm): Jm) -> Json<Vec<JobSummary>> {
    Json(jm.list().into_iter().map(JobSummary::from).collect())
}

/// Plans a SQL script and queues it as a job.
#[utoipa::path(post, path = "/v1/jobs", tag = "jobs", request_body = SubmitJob,
    responses(
        (status = 201, body = Submitted),
        (status = 400, description = "invalid SQL (with line:column) or options", body = ApiErrorBody),
        (status = 401, description = "no valid token", body = ApiErrorBody),
        (status = 403, description = "a read-only token, or a job the cluster's policy refuses", body = ApiErrorBody),
        (status = 413, description = "the body is too large", body = ApiErrorBody)))]
pub async fn submit_job(
    State(jm): Jm,
    Extension(principal): Extension<Principal>,
    JsonBody(job): JsonBody<SubmitJob>,
) -> Result<(StatusCode, Json<Submitted>), ApiError> {
    let restore = job.restore_path.filter(|p| !p.is_empty());
    let jm2 = jm.clone();
    // Planning is CPU work: off the server's threads.
    let id = tokio::task::spawn_blocking(move || {
        jm2.submit(job.sql, job.options, restore, &principal.name)
    })
    .await
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))??;
    Ok((StatusCode::CREATED, Json(Submitted { id })))
}

/// One job: state, graph, per-vertex metrics, checkpoints, restarts.
#[utoipa::path(get, path = "/v1/jobs/{id}", tag = "jobs",
    params(("id" = String, Path, description = "the job's id")),
    responses((status = 200, body = JobDetail), (status = 404, body = ApiErrorBody)))]
pub async fn get_job(State(jm): Jm, Path(id): Path<String>) -> Result<Json<JobDetail>, ApiError> {
    Ok(Json(jm.job(&id)?.into()))
}

/// A job's recent checkpoints, newest last.
#[utoipa::path(get, path = "/v1/jobs/{id}/checkpoints", tag = "jobs",
    params(("id" = String, Path, description = "the job's id")),
    responses((status = 200, body = [Checkpoint]), (status = 404, body = ApiErrorBody)))]
pub async fn checkpoints(
    State(jm): Jm,
    Path(id): Path<String>,
) -> Result<Json<Vec<Checkpoint>>, ApiError> {
    let job = jm.job(&id)?;
    Ok(Json(
        job.checkpoints.into_iter().map(Checkpoint::from).collect(),
    ))
}

/// Takes a savepoint; answers when it is complete.
#[utoipa::path(post, path = "/v1/jobs/{id}/savepoints", tag = "jobs",
    params(("id" = String, Path, description = "the job's id")),
    responses(
        (status = 200, body = Savepoint),
        (status = 404, body = ApiErrorBody),
        (status = 409, description = "the job is not running or does not checkpoint", body = ApiErrorBody)))]
pub async fn savepoint(State(jm): Jm, Path(id): Path<String>) -> Result<Json<Savepoint>, ApiError> {
    let path = jm.savepoint(&id, false).await?;
    Ok(Json(Savepoint { path }))
}

/// Stops a job: with a savepoint (the default when it checkpoints), or by draining.
#[utoipa::path(post, path = "/v1/jobs/{id}/stop", tag = "jobs", request_body = Option<StopJob>,
    params(("id" = String, Path, description = "the job's id")),
    responses(
        (status = 200, body = Stopped),
        (status = 404, body = ApiErrorBody),
        (status = 409, body = ApiErrorBody)))]
pub async fn stop(
    State(jm): Jm,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<Stopped>, ApiError> {
    // The body is optional: none stops the job the way it can resume.
    let how: StopJob = match body.is_empty() {
        true => StopJob::default(),
        false => serde_json::from_slice(&body).map_err(|e| {
            ApiError::new(StatusCode::BAD_REQUEST, format!("the stop request: {e}"))
        })?,
    };
    let checkpoints = jm.takes_checkpoints(&id)?;
    let with_savepoint = how.savepoint.unwrap_or(checkpoints);
    if with_savepoint {
        let path = jm.savepoint(&id, true).await?;
        return Ok(Json(Stopped {
            savepoint_path: Some(path),
        }));
    }
    jm.drain(&id)?;
    Ok(Json(Stopped {
        savepoint_path: None,
    }))
}

/// Cancels a job: its tasks stop and sinks roll back what no checkpoint covers.
#[utoipa::path(delete, path = "/v1/jobs/{id}", tag = "jobs",
    params(("id" = String, Path, description = "the job's id")),
    responses(
        (status = 204, description = "cancelled"),
        (status = 404, body = ApiErrorBody),
        (status = 409, body = ApiErrorBody)))]
pub async fn cancel(State(jm): Jm, Path(id): Path<String>) -> Result<StatusCode, ApiError> {
    jm.cancel(&id)?;
    Ok(StatusCode::NO_CONTENT)
}

/// The registered TaskManagers and their slots.
#[utoipa::path(get, path = "/v1/taskmanagers", tag = "cluster",
    responses((status = 200, body = [TaskManager])))]
pub async fn taskmanagers(State(jm): Jm) -> Json<Vec<TaskManager>> {
    Json(
        jm.taskmanagers()
            .into_iter()
            .map(TaskManager::from)
            .collect(),
    )
}

/// The leading JobManager (the one answering: standbys serve no API).
#[utoipa::path(get, path = "/v1/leader", tag = "cluster",
    responses((status = 200, body = Leader)))]
pub async fn leader(State(jm): Jm) -> Json<Leader> {
    Json(Leader::from(jm.leadership()))
}

/// A request for a path no route serves.
pub async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no such resource")
}

/// The REST API's OpenAPI document.
#[derive(OpenApi)]
#[openapi(
    info(title = "Eddy JobManager REST API", description = "Submit, watch, savepoint, stop and cancel Eddy jobs."),
    paths(list_jobs, submit_job, get_job, checkpoints, savepoint, stop, cancel, taskmanagers, leader),
    tags((name = "jobs", description = "Jobs"), (name = "cluster", description = "The cluster"))
)]
pub struct ApiDoc;
