//! What the client commands print: job lists, a job's status (tables for people, JSON for
//! scripts) and `eddy top`'s live view.

use std::time::Duration;

use anyhow::Result;
use eddy_proto::v1 as pb;

use super::{OutputFormat, Target, status_error};

/// `eddy list`.
pub async fn list(target: &Target, format: OutputFormat) -> Result<()> {
    let mut client = target.connect().await?;
    let jobs = client
        .list_jobs(pb::ListJobsRequest {})
        .await
        .map_err(status_error)?
        .into_inner()
        .jobs;
    match format {
        OutputFormat::Json => {
            let values: Vec<serde_json::Value> = jobs
                .iter()
                .map(|j| {
                    serde_json::json!({
                        "job_id": j.job_id, "name": j.name, "state": job_state(j.state),
                        "submitted_at_ms": j.submitted_at_ms, "slots": j.slots,
                    })
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&values)?);
        }
        OutputFormat::Table => {
            println!("{:<18} {:<12} {:>5}  NAME", "JOB", "STATE", "SLOTS");
            for j in jobs {
                println!(
                    "{:<18} {:<12} {:>5}  {}",
                    j.job_id,
                    job_state(j.state),
                    j.slots,
                    j.name
                );
            }
        }
    }
    Ok(())
}

fn job_state(state: i32) -> &'static str {
    match pb::JobState::try_from(state).unwrap_or(pb::JobState::Unspecified) {
        pb::JobState::Created => "CREATED",
        pb::JobState::Running => "RUNNING",
        pb::JobState::Finished => "FINISHED",
        pb::JobState::Cancelling => "CANCELLING",
        pb::JobState::Cancelled => "CANCELLED",
        pb::JobState::Failed => "FAILED",
        pb::JobState::Restarting => "RESTARTING",
        pb::JobState::Unspecified => "UNKNOWN",
    }
}

fn task_state(state: i32) -> &'static str {
    match pb::TaskState::try_from(state).unwrap_or(pb::TaskState::Unspecified) {
        pb::TaskState::Scheduled => "SCHEDULED",
        pb::TaskState::Running => "RUNNING",
        pb::TaskState::Finished => "FINISHED",
        pb::TaskState::Cancelled => "CANCELLED",
        pb::TaskState::Stopped => "STOPPED",
        pb::TaskState::Failed => "FAILED",
        pb::TaskState::Unspecified => "-",
    }
}

/// `eddy top`: the job's vertex table, redrawn every `interval_ms` until the job ends.
pub async fn top(target: &Target, job_id: String, interval_ms: u64) -> Result<()> {
    let mut client = target.connect().await?;
    loop {
        let job = client
            .get_job(pb::GetJobRequest {
                job_id: job_id.clone(),
            })
            .await
            .map_err(status_error)?
            .into_inner();
        // Clear the screen and home the cursor, then draw.
        print!("\x1b[2J\x1b[H");
        println!(
            "job {} ({}): {}  restarts: {}",
            job.job_id,
            job.name,
            job_state(job.state),
            job.restarts
        );
        if !job.reason.is_empty() {
            println!("  {}", job.reason);
        }
        println!("  {}\n", crate::watch::progress_line(&job));
        print!("{}", crate::watch::vertex_table(&job));
        let ended = matches!(
            pb::JobState::try_from(job.state),
            Ok(pb::JobState::Finished | pb::JobState::Cancelled | pb::JobState::Failed)
        );
        if ended {
            return Ok(());
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(interval_ms.max(100))) => {}
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
    }
}

/// The restarts as `eddy status` shows them: in all, against the strategy's budget, and
/// the strategy's last reset.
fn restarts_line(job: &pb::JobInfo) -> String {
    let mut line = format!(
        "{} ({} counted by {})",
        job.restarts, job.restart_attempts, job.restart_strategy
    );
    if job.restart_reset_at_ms > 0 {
        let ago = (eddy_common::event::wall_clock() - job.restart_reset_at_ms).max(0) / 1000;
        line.push_str(&format!("; backoff reset {ago} s ago"));
    }
    line
}

/// `eddy status`.
pub async fn status(
    target: &Target,
    job_id: String,
    format: OutputFormat,
    checkpoints: bool,
) -> Result<()> {
    let mut client = target.connect().await?;
    let job = client
        .get_job(pb::GetJobRequest { job_id })
        .await
        .map_err(status_error)?
        .into_inner();
    match format {
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&status_json(&job))?),
        OutputFormat::Table => print_status(&job, checkpoints),
    }
    Ok(())
}

/// A job's status for scripts.
fn status_json(job: &pb::JobInfo) -> serde_json::Value {
    let vertices: Vec<serde_json::Value> = job.vertices.iter().map(vertex_json).collect();
    let checkpoint_list: Vec<serde_json::Value> =
        job.checkpoints.iter().map(checkpoint_json).collect();
    let leader = job.leader.as_ref().map(|l| {
        serde_json::json!({"term": l.term, "holder": l.holder, "address": l.address, "since_ms": l.since_ms})
    });
    serde_json::json!({
        "job_id": job.job_id, "name": job.name, "state": job_state(job.state), "reason": job.reason,
        "submitted_at_ms": job.submitted_at_ms, "started_at_ms": job.started_at_ms,
        "restarts": job.restarts, "restart_strategy": job.restart_strategy,
        "restart_attempts": job.restart_attempts, "restart_reset_at_ms": job.restart_reset_at_ms,
        "restored_from": job.restored_from, "vertices": vertices,
        "checkpoints": checkpoint_list, "leader": leader,
    })
}

fn vertex_json(v: &pb::VertexInfo) -> serde_json::Value {
    let subtasks: Vec<serde_json::Value> = v
        .subtasks
        .iter()
        .map(|s| {
            serde_json::json!({
                "index": s.index, "taskmanager": s.taskmanager_id, "state": task_state(s.state),
                "records_in": s.records_in, "records_out": s.records_out,
            })
        })
        .collect();
    let m = v.metrics.clone().unwrap_or_default();
    let metrics = serde_json::json!({
        "records_in_per_second": m.records_in_per_second,
        "records_out_per_second": m.records_out_per_second,
        "busy_ratio": m.busy_ratio, "backpressured_ratio": m.backpressured_ratio,
        "watermark_out_ms": m.totals.and_then(|t| t.watermark_out),
    });
    serde_json::json!({"id": v.id, "name": v.name, "parallelism": v.parallelism, "metrics": metrics, "subtasks": subtasks})
}

/// A job's status for people.
fn print_status(job: &pb::JobInfo, checkpoints: bool) {
    println!(
        "job {} ({}): {}",
        job.job_id,
        job.name,
        job_state(job.state)
    );
    if !job.reason.is_empty() {
        println!("  {}", job.reason);
    }
    println!("  restarts: {}", restarts_line(job));
    if let Some(leader) = &job.leader {
        let now = eddy_common::event::wall_clock();
        println!(
            "  jobmanager: {} at {} leads, term {} for {} s",
            leader.holder,
            leader.address,
            leader.term,
            (now - leader.since_ms).max(0) / 1000
        );
    }
    if job.restored_from > 0 {
        println!("  restored from checkpoint {}", job.restored_from);
    }
    print!("{}", crate::watch::vertex_table(job));
    println!();
    println!(
        "  {:<24} {:>7}  {:<28} {:<10} {:>12} {:>12}",
        "VERTEX", "SUBTASK", "TASKMANAGER", "STATE", "RECORDS IN", "RECORDS OUT"
    );
    for v in &job.vertices {
        for s in &v.subtasks {
            println!(
                "  {:<24} {:>7}  {:<28} {:<10} {:>12} {:>12}",
                v.name,
                s.index,
                s.taskmanager_id,
                task_state(s.state),
                s.records_in,
                s.records_out
            );
        }
    }
    if checkpoints {
        print_checkpoints(&job.checkpoints);
    }
}

fn checkpoint_state(state: i32) -> &'static str {
    match pb::CheckpointState::try_from(state).unwrap_or(pb::CheckpointState::Unspecified) {
        pb::CheckpointState::InProgress => "IN_PROGRESS",
        pb::CheckpointState::Completed => "COMPLETED",
        pb::CheckpointState::Failed => "FAILED",
        pb::CheckpointState::Unspecified => "-",
    }
}

fn checkpoint_json(c: &pb::CheckpointInfo) -> serde_json::Value {
    let acks: Vec<serde_json::Value> = c
        .acks
        .iter()
        .map(|a| {
            serde_json::json!({
                "vertex": a.vertex, "subtask": a.subtask, "ack_ms": a.ack_ms,
                "alignment_ms": a.alignment_ms, "size_bytes": a.size_bytes,
            })
        })
        .collect();
    serde_json::json!({
        "id": c.id, "state": checkpoint_state(c.state), "triggered_at_ms": c.triggered_at_ms,
        "duration_ms": c.duration_ms, "size_bytes": c.size_bytes,
        "full_size_bytes": c.full_size_bytes, "alignment_ms": c.alignment_ms,
        "failure": c.failure, "acks": acks,
    })
}

fn print_checkpoints(checkpoints: &[pb::CheckpointInfo]) {
    println!(
        "  {:>6} {:<12} {:>15} {:>10} {:>12} {:>12}  TASK ACKS (vertex[subtask]: ms)",
        "ID", "STATE", "TRIGGERED (ms)", "DURATION", "SIZE", "ALIGNMENT"
    );
    for c in checkpoints {
        let acks: Vec<String> = c
            .acks
            .iter()
            .map(|a| format!("v{}[{}]: {}", a.vertex, a.subtask, a.ack_ms))
            .collect();
        println!(
            "  {:>6} {:<12} {:>15} {:>8}ms {:>10} B {:>10}ms  {}",
            c.id,
            checkpoint_state(c.state),
            c.triggered_at_ms,
            c.duration_ms,
            c.size_bytes,
            c.alignment_ms,
            if c.failure.is_empty() {
                acks.join(", ")
            } else {
                c.failure.clone()
            }
        );
    }
}
