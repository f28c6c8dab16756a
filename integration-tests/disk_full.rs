//! A full disk under a running exactly-once job: the local checkpoint store, and the
//! directory the TaskManagers write the sink's files into, each on a small tmpfs that the
//! test fills to the last byte for a while and then frees. Checkpoints (and the job store's
//! writes) or the sink's writes fail meanwhile; the job restarts as its default strategy
//! says until there is room again, and then ends exact: the windows of a failure-free run,
//! each once, no file left hidden. The LSM state backend's directory likewise: its stores
//! cannot write runs (or fetch them on a restore) while it is full, and the job ends with
//! every count exact. Needs root (`mount`), as CI runs; fails loudly without.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::processes::Cluster;
use crate::recovery::{
    LSM_BACKEND, assert_windows_exact, failure_free, job, largest_counts, windows_into_files,
};
use crate::support::exclusive;

/// How long the disk stays full: several checkpoint intervals and restarts.
const FULL: Duration = Duration::from_secs(6);

/// A tmpfs of `size` mounted on a fresh directory; unmounted on drop.
struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    fn mount(path: PathBuf, size: &str) -> Tmpfs {
        std::fs::create_dir_all(&path).unwrap();
        let options = format!("size={size}");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &options, "tmpfs"])
            .arg(&path)
            .status()
            .expect("run mount (the disk-full tests need it)");
        assert!(
            status.success(),
            "cannot mount a tmpfs on {path:?} (the disk-full tests need root)"
        );
        Tmpfs { path }
    }

    /// Fills it to the last byte with one file; returns that file.
    fn fill(&self) -> PathBuf {
        let filler = self.path.join("filler");
        let mut file = std::fs::File::create(&filler).unwrap();
        let block = vec![0u8; 64 * 1024];
        while file.write_all(&block).is_ok() {}
        // The last bytes that fit in no whole block.
        while file.write_all(&[0]).is_ok() {}
        filler
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

/// Runs the exactly-once windows job on a JobManager and two TaskManagers (with
/// `jobmanager_args`, which may put its checkpoints on `disk`), writing its windows to
/// `output`; fills `disk` for [`FULL`] three seconds into the run, then frees it. The job
/// must end exact, after restarting at least once.
fn fill_while_running(cluster: &Cluster, disk: &Tmpfs, output: &Path) {
    let script = format!(
        "SET 'execution.checkpointing.interval' = '500ms';
         {}",
        windows_into_files("", output, 400_000, 20_000)
    );
    let job = cluster.submit(&script, 2);
    cluster.wait_for(&job, "RUNNING", Duration::from_secs(60));
    std::thread::sleep(Duration::from_secs(3));
    let filler = disk.fill();
    eprintln!("disk full");
    std::thread::sleep(FULL);
    std::fs::remove_file(filler).unwrap();
    eprintln!("disk freed");
    let status = cluster.wait_for(&job, "FINISHED", Duration::from_secs(180));
    assert!(
        status["restarts"].as_u64().unwrap_or(0) >= 1,
        "nothing failed while the disk was full: {status}"
    );
    assert_windows_exact(&cluster.scratch, output);
}

/// The local checkpoint store (snapshots, commit log, job records) fills up: snapshots are
/// declined and metadata cannot be written, which count as failed checkpoints; the job
/// restarts from its last complete checkpoint until there is room.
#[test]
fn a_full_checkpoint_store_delays_the_job_but_loses_and_repeats_nothing() {
    let _heavy = exclusive();
    let scratch = crate::support::Scratch::new("disk-full-checkpoints");
    let disk = Tmpfs::mount(scratch.path().join("store"), "64m");
    let store = disk.path.display().to_string();
    let cluster = Cluster::start_with(
        "disk-full-checkpoints",
        2,
        2,
        &["--checkpoint-dir", &store],
        &[],
    );
    let output = cluster.scratch.path().join("windows");
    fill_while_running(&cluster, &disk, &output);
}

/// The directory the TaskManagers write the sink's files into fills up: writing a part
/// file fails the task, and the job restarts until there is room; nothing half-written is
/// ever committed.
#[test]
fn a_full_sink_directory_delays_the_job_but_loses_and_repeats_nothing() {
    let _heavy = exclusive();
    let cluster = Cluster::start("disk-full-sink", 2, 2);
    let disk = Tmpfs::mount(cluster.scratch.path().join("sink"), "64m");
    let output = disk.path.join("windows");
    fill_while_running(&cluster, &disk, &output);
}

/// The LSM state backend's directory fills up: the GROUP BY's store cannot write its runs,
/// which fails the task with the directory's error; restores cannot fetch runs either, and
/// the job restarts until there is room. Every count ends exact: nothing committed lost,
/// nothing counted twice.
#[test]
fn a_full_state_directory_delays_the_job_but_loses_and_repeats_nothing() {
    let _heavy = exclusive();
    let cluster = Cluster::start("disk-full-state", 2, 2);
    let disk = Tmpfs::mount(cluster.scratch.path().join("state"), "64m");
    let script = format!(
        "{LSM_BACKEND}SET 'state.backend.rocksdb.localdir' = '{}';
         {}",
        disk.path.display(),
        job(400_000, 25_000, "EXACTLY_ONCE", "200ms")
    );
    let job_id = cluster.submit(&script, 4);
    cluster.wait_for(&job_id, "RUNNING", Duration::from_secs(60));
    std::thread::sleep(Duration::from_secs(3));
    let filler = disk.fill();
    eprintln!("disk full");
    let until = std::time::Instant::now() + FULL;
    let mut reasons = Vec::new();
    while std::time::Instant::now() < until {
        let reason = cluster.status(&job_id)["reason"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if !reason.is_empty() && !reasons.contains(&reason) {
            reasons.push(reason);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::fs::remove_file(filler).unwrap();
    eprintln!("disk freed; reasons seen: {reasons:#?}");
    assert!(
        reasons.iter().any(|r| r.contains("No space left on device")
            && r.contains(&disk.path.display().to_string())),
        "no failure named the full state directory: {reasons:?}"
    );
    let status = cluster.wait_for(&job_id, "FINISHED", Duration::from_secs(180));
    assert!(status["restarts"].as_u64().unwrap_or(0) >= 1, "{status}");
    let expected = failure_free(&cluster.scratch, 400_000);
    assert_eq!(largest_counts(&cluster.printed()), expected);
}
