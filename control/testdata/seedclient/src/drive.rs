//! `seedclient drive <socket>`: one full project lifecycle against a live
//! daemon, checked step by step against SPEC section 3.
//!
//! Prints one line per step and `seedclient drive: ok` at the end; the first
//! failed check stops the run with exit status 1, naming the step.

use std::fmt::Display;
use std::path::Path;

use serde::Serialize;

use crate::daemon::{
    DaemonCommand, DaemonStatus, ProjectEvent, ProjectPhase, ProjectReport, ProjectResponse,
    ProjectRunStatus, ProjectStatus, ProjectSummary, ProjectTask, ProjectTaskStatus,
};
use crate::rpc::{Client, Reply, RpcError};

/// Fail the current step unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

/// Fail the current step unless `got == want`.
macro_rules! ensure_eq {
    ($got:expr, $want:expr, $what:expr) => {{
        let (got, want) = (&$got, &$want);
        if got != want {
            return Err(format!("{}: got {:?}, want {:?}", $what, got, want));
        }
    }};
}

pub fn run(socket: &str, exact: bool) -> Result<(), String> {
    let pid = std::process::id();
    let root = std::env::temp_dir().join(format!("seedclient-{pid}"));
    let mut d = Driver {
        client: Client::connect(socket, exact)?,
        step: 0,
    };
    let outcome = scenario(&mut d, pid, &root);
    let _ = std::fs::remove_dir_all(&root);
    outcome.map_err(|e| format!("step {:02}: {e}", d.step + 1))?;
    if let Some(first) = d.client.inexact.first() {
        println!(
            "note: {} replies had serde's JSON value but not its exact text; first: {first}",
            d.client.inexact.len()
        );
    }
    println!("seedclient drive: ok");
    Ok(())
}

fn scenario(d: &mut Driver, pid: u32, root: &Path) -> Result<(), String> {
    let acme = format!("acme-{pid}");
    let beta = format!("beta-{pid}");

    // A bare status carries no project.
    let st = d.ok(DaemonCommand::Status)?;
    ensure!(st.project.is_none(), "status has a project: {}", json(&st));
    d.pass(format!(
        "status: version {}, pid {}, no project",
        st.version, st.pid
    ));

    // Create: discovery, active, no tasks.
    let acme_ws = workspace(root, "acme")?;
    let p = created(d.ok(create(&acme, &acme_ws))?)?;
    ensure_eq!(p.name, acme, "name");
    ensure_eq!(p.workspace, acme_ws, "workspace");
    ensure_eq!(p.status, ProjectStatus::Active, "status");
    ensure_eq!(p.phase, ProjectPhase::Discovery, "phase");
    ensure_eq!(p.task_count, 0, "task_count");
    ensure_eq!(p.completed_tasks, 0, "completed_tasks");
    ensure!(
        p.updated_unix_seconds >= p.created_unix_seconds,
        "updated before created: {p:?}"
    );
    ulid("project id", &p.id)?;
    let acme_id = p.id;
    d.pass(format!(
        "project_create {acme}: id {acme_id}, discovery, active, 0 tasks"
    ));

    // Status by name and by ID.
    for (how, key) in [("name", &acme), ("id", &acme_id)] {
        let p = status_of(d.ok(project_status(key))?)?;
        ensure_eq!(p.id, acme_id, "id");
        ensure_eq!(p.name, acme, "name");
        d.pass(format!("project_status by {how}: kind status, same id"));
    }

    // Tasks: build (no retries), then test after build (two retries).
    let (p, build) = task_added(d.ok(task_add(&acme, "build", &[], 0))?)?;
    ulid("task id", &build)?;
    ensure_eq!(p.task_count, 1, "task_count");
    ensure_eq!(p.phase, ProjectPhase::Planning, "phase");
    ensure_eq!(p.status, ProjectStatus::Active, "status");
    d.pass(format!("project_task_add build: {build}, planning"));

    let (p, test) = task_added(d.ok(task_add(&acme, "test", &[&build], 2))?)?;
    ulid("task id", &test)?;
    ensure_eq!(p.task_count, 2, "task_count");
    d.pass(format!(
        "project_task_add test: {test}, depends on build, max_retries 2"
    ));

    let t = tasks_of(d.ok(project_tasks(&acme))?, &acme_id)?;
    let b = task(&t, &build)?;
    ensure_eq!(b.status, ProjectTaskStatus::Ready, "build status");
    ensure_eq!(b.max_retries, 0, "build max_retries");
    ensure_eq!(b.run_id, None::<String>, "build run_id");
    let x = task(&t, &test)?;
    ensure_eq!(x.status, ProjectTaskStatus::Pending, "test status");
    ensure_eq!(x.depends_on, vec![build.clone()], "test depends_on");
    ensure_eq!(x.max_retries, 2, "test max_retries");
    d.pass("project_tasks: build ready, test pending");

    // Build runs, reports progress and heartbeats, and succeeds.
    let (p, build_run) = run_started(d.ok(run_start(&acme, &build))?)?;
    ulid("run id", &build_run)?;
    ensure_eq!(p.phase, ProjectPhase::Implementation, "phase");
    ensure_eq!(p.status, ProjectStatus::Active, "status");
    d.pass(format!(
        "project_run_start build: run {build_run}, implementation"
    ));

    let p = updated(d.ok(run_progress(&acme, &build_run, "compiling"))?)?;
    ensure!(
        p.last_heartbeat_unix_seconds.is_some(),
        "run progress counts as a heartbeat, yet last_heartbeat_unix_seconds is null"
    );
    d.pass("project_run_progress \"compiling\": updated");

    let p = updated(d.ok(heartbeat(&acme, Some(&build), Some(&build_run)))?)?;
    let Some(beat) = p.last_heartbeat_unix_seconds else {
        return Err("last_heartbeat_unix_seconds is null after a heartbeat".into());
    };
    let t = tasks_of(d.ok(project_tasks(&acme))?, &acme_id)?;
    let b = task(&t, &build)?;
    ensure_eq!(b.status, ProjectTaskStatus::Running, "build status");
    ensure_eq!(
        b.run_id.as_deref(),
        Some(build_run.as_str()),
        "build run_id"
    );
    ensure!(
        b.last_heartbeat_unix_seconds.is_some(),
        "build last_heartbeat_unix_seconds is null"
    );
    d.pass(format!(
        "project_heartbeat task+run: last heartbeat {beat}, build running"
    ));

    let p = updated(d.ok(run_finish(&acme, &build_run, ProjectRunStatus::Succeeded))?)?;
    ensure_eq!(p.completed_tasks, 1, "completed_tasks");
    ensure_eq!(p.phase, ProjectPhase::Verification, "phase");
    ensure_eq!(p.status, ProjectStatus::Active, "status");
    let t = tasks_of(d.ok(project_tasks(&acme))?, &acme_id)?;
    let b = task(&t, &build)?;
    ensure_eq!(b.status, ProjectTaskStatus::Done, "build status");
    ensure_eq!(b.run_id, None::<String>, "build run_id");
    ensure_eq!(
        task(&t, &test)?.status,
        ProjectTaskStatus::Ready,
        "test status"
    );
    d.pass("project_run_finish succeeded: build done, test ready, verification");

    // Test fails three times: max_retries 2 allows three attempts in all.
    let mut test_runs = Vec::new();
    for attempt in 1..=3u32 {
        let (p, run) = run_started(d.ok(run_start(&acme, &test))?)?;
        ulid("run id", &run)?;
        ensure_eq!(p.phase, ProjectPhase::Implementation, "phase");
        let r = report_of(d.ok(project_report(&acme))?)?;
        let Some(started) = r.runs.iter().find(|x| x.id == run) else {
            return Err(format!("run {run} is not in the report: {}", json(&r.runs)));
        };
        ensure_eq!(started.attempt, attempt, "attempt");
        ensure_eq!(started.task_id, test, "run task_id");
        ensure_eq!(started.agent, "codex", "run agent");
        ensure_eq!(started.status, ProjectRunStatus::Running, "run status");

        let p = updated(d.ok(run_finish(&acme, &run, ProjectRunStatus::Failed))?)?;
        let (want_task, want_project) = if attempt <= 2 {
            (ProjectTaskStatus::Ready, ProjectStatus::Active)
        } else {
            (ProjectTaskStatus::Failed, ProjectStatus::Failed)
        };
        ensure_eq!(p.status, want_project, "project status");
        let t = tasks_of(d.ok(project_tasks(&acme))?, &acme_id)?;
        let x = task(&t, &test)?;
        ensure_eq!(x.status, want_task, "test status");
        ensure_eq!(x.retries, attempt, "test retries");
        ensure_eq!(x.run_id, None::<String>, "test run_id");
        d.pass(format!(
            "test attempt {attempt} (run {run}) failed: test {}, retries {attempt}, project {}",
            name(&want_task),
            name(&want_project)
        ));
        test_runs.push(run);
    }

    // A finished run is fenced: its progress, heartbeat and finish are refused.
    let last = &test_runs[2];
    for command in [
        run_progress(&acme, last, "zombie"),
        heartbeat(&acme, Some(&test), Some(last)),
        run_finish(&acme, last, ProjectRunStatus::Succeeded),
    ] {
        let action = action(&command);
        let e = d.refused(command)?;
        ensure!(
            (-32099..=-32000).contains(&e.code),
            "code {} is not an application error",
            e.code
        );
        let reason = e.reason().unwrap_or_default();
        ensure!(
            !reason.is_empty(),
            "data.reason is not a non-empty string: {:?}",
            e.data
        );
        d.pass(format!(
            "fenced {action} on the finished run: code {}, reason {reason}",
            e.code
        ));
    }

    // Beta: max_retries 0, so the first failure is final.
    let beta_ws = workspace(root, "beta")?;
    let beta_id = created(d.ok(create(&beta, &beta_ws))?)?.id;
    let (_, once) = task_added(d.ok(task_add(&beta, "once", &[], 0))?)?;
    let (_, run) = run_started(d.ok(run_start(&beta, &once))?)?;
    let p = updated(d.ok(run_finish(&beta, &run, ProjectRunStatus::Failed))?)?;
    ensure_eq!(p.status, ProjectStatus::Failed, "project status");
    let t = tasks_of(d.ok(project_tasks(&beta))?, &beta_id)?;
    let x = task(&t, &once)?;
    ensure_eq!(x.status, ProjectTaskStatus::Failed, "once status");
    ensure_eq!(x.retries, 1, "once retries");
    d.pass(format!(
        "{beta}: max_retries 0, first failure: task failed, project failed"
    ));

    // Events: all of acme's, then only those after the third.
    let all = events_of(d.ok(project_events(&acme, None))?, &acme_id)?;
    ensure!(all.len() > 3, "only {} events", all.len());
    ensure_eq!(all[0].kind, "project_created", "first event kind");
    increasing(&all)?;
    let third = all[2].sequence;
    let later = events_of(d.ok(project_events(&acme, Some(third)))?, &acme_id)?;
    ensure!(!later.is_empty(), "no events after sequence {third}");
    ensure!(
        later.iter().all(|e| e.sequence > third),
        "an event at or before sequence {third}"
    );
    ensure_eq!(later[0], all[3], "first event after the third");
    increasing(&later)?;
    d.pass(format!(
        "project_events: {} events, sequences {}..{}, first project_created; after={third}: {} events from {}",
        all.len(),
        all[0].sequence,
        all[all.len() - 1].sequence,
        later.len(),
        later[0].sequence
    ));

    // Report: three failed attempts of test, and some evidence.
    let r = report_of(d.ok(project_report(&acme))?)?;
    ensure_eq!(r.project.id, acme_id, "report project id");
    ensure_eq!(r.tasks.len(), 2, "report tasks");
    let test_attempts: Vec<_> = r.runs.iter().filter(|x| x.task_id == test).collect();
    let mut attempts: Vec<u32> = test_attempts.iter().map(|x| x.attempt).collect();
    attempts.sort_unstable();
    ensure_eq!(attempts, vec![1, 2, 3], "attempts of test");
    for run in test_attempts {
        ensure_eq!(
            run.status,
            ProjectRunStatus::Failed,
            format!("run {} status", run.id)
        );
    }
    ensure!(!r.evidence.is_empty(), "evidence is empty");
    d.pass(format!(
        "project_report: {} runs, test attempts 1,2,3, evidence {:?}",
        r.runs.len(),
        r.evidence
    ));

    // Owner-observed updates on a fresh task: blocked, then ready again.
    let (_, docs) = task_added(d.ok(task_add(&acme, "docs", &[], 0))?)?;
    for (status, progress) in [
        (ProjectTaskStatus::Blocked, Some("waiting for review")),
        (ProjectTaskStatus::Ready, None),
    ] {
        let update = DaemonCommand::ProjectTaskUpdate {
            project: acme.clone(),
            task: docs.clone(),
            status,
            progress: progress.map(String::from),
        };
        updated(d.ok(update)?)?;
        let t = tasks_of(d.ok(project_tasks(&acme))?, &acme_id)?;
        ensure_eq!(task(&t, &docs)?.status, status, "docs status");
        d.pass(format!(
            "project_task_update docs -> {}: updated",
            name(&status)
        ));
    }

    // An unknown project is not_found.
    let e = d.refused(project_status(&format!("no-such-project-{pid}")))?;
    ensure_eq!(e.reason(), Some("not_found"), "data.reason");
    d.pass(format!(
        "project_status on an unknown name: code {}, not_found",
        e.code
    ));
    Ok(())
}

/// Sends commands and numbers the passed steps.
struct Driver {
    client: Client,
    step: usize,
}

impl Driver {
    /// Send `command`; it must succeed.
    fn ok(&mut self, command: DaemonCommand) -> Result<DaemonStatus, String> {
        match self.client.call(&command)? {
            Reply::Result(status) => Ok(status),
            Reply::Error(e) => Err(format!(
                "{} refused: code {}, message {:?}, data {}\n  request: {}",
                action(&command),
                e.code,
                e.message,
                json(&e.data),
                json(&command)
            )),
        }
    }

    /// Send `command`; it must be refused with a JSON-RPC error.
    fn refused(&mut self, command: DaemonCommand) -> Result<RpcError, String> {
        match self.client.call(&command)? {
            Reply::Error(e) => Ok(e),
            Reply::Result(status) => Err(format!(
                "{} accepted, want an error\n  request: {}\n  result:  {}",
                action(&command),
                json(&command),
                json(&status)
            )),
        }
    }

    fn pass(&mut self, line: impl Display) {
        self.step += 1;
        println!("step {:02} ok: {line}", self.step);
    }
}

// Commands, built from the seed's own types.

fn create(name: &str, workspace: &str) -> DaemonCommand {
    DaemonCommand::ProjectCreate {
        name: name.into(),
        workspace: workspace.into(),
    }
}

fn project_status(project: &str) -> DaemonCommand {
    DaemonCommand::ProjectStatus {
        project: project.into(),
    }
}

fn project_tasks(project: &str) -> DaemonCommand {
    DaemonCommand::ProjectTasks {
        project: project.into(),
    }
}

fn project_report(project: &str) -> DaemonCommand {
    DaemonCommand::ProjectReport {
        project: project.into(),
    }
}

fn project_events(project: &str, after: Option<u64>) -> DaemonCommand {
    DaemonCommand::ProjectEvents {
        project: project.into(),
        after,
    }
}

fn task_add(project: &str, title: &str, depends_on: &[&str], max_retries: u32) -> DaemonCommand {
    DaemonCommand::ProjectTaskAdd {
        project: project.into(),
        title: title.into(),
        depends_on: depends_on.iter().map(|s| s.to_string()).collect(),
        max_retries,
    }
}

fn run_start(project: &str, task: &str) -> DaemonCommand {
    DaemonCommand::ProjectRunStart {
        project: project.into(),
        task: task.into(),
        agent: "codex".into(),
    }
}

fn run_progress(project: &str, run: &str, progress: &str) -> DaemonCommand {
    DaemonCommand::ProjectRunProgress {
        project: project.into(),
        run: run.into(),
        progress: progress.into(),
    }
}

fn run_finish(project: &str, run: &str, status: ProjectRunStatus) -> DaemonCommand {
    DaemonCommand::ProjectRunFinish {
        project: project.into(),
        run: run.into(),
        status,
    }
}

fn heartbeat(project: &str, task: Option<&str>, run: Option<&str>) -> DaemonCommand {
    DaemonCommand::ProjectHeartbeat {
        project: project.into(),
        task: task.map(String::from),
        run: run.map(String::from),
    }
}

// Replies: each project command answers with one `ProjectResponse` kind.

fn response(status: DaemonStatus) -> Result<ProjectResponse, String> {
    status
        .project
        .ok_or_else(|| "the result has no `project`".to_string())
}

fn wrong_kind(want: &str, got: &ProjectResponse) -> String {
    format!("want kind {want}, got {}", json(got))
}

fn created(status: DaemonStatus) -> Result<ProjectSummary, String> {
    match response(status)? {
        ProjectResponse::Created { project } => Ok(project),
        other => Err(wrong_kind("created", &other)),
    }
}

fn status_of(status: DaemonStatus) -> Result<ProjectSummary, String> {
    match response(status)? {
        ProjectResponse::Status { project } => Ok(project),
        other => Err(wrong_kind("status", &other)),
    }
}

fn updated(status: DaemonStatus) -> Result<ProjectSummary, String> {
    match response(status)? {
        ProjectResponse::Updated { project } => Ok(project),
        other => Err(wrong_kind("updated", &other)),
    }
}

fn task_added(status: DaemonStatus) -> Result<(ProjectSummary, String), String> {
    match response(status)? {
        ProjectResponse::TaskAdded { project, task_id } => Ok((project, task_id)),
        other => Err(wrong_kind("task_added", &other)),
    }
}

fn run_started(status: DaemonStatus) -> Result<(ProjectSummary, String), String> {
    match response(status)? {
        ProjectResponse::RunStarted { project, run_id } => Ok((project, run_id)),
        other => Err(wrong_kind("run_started", &other)),
    }
}

fn tasks_of(status: DaemonStatus, project_id: &str) -> Result<Vec<ProjectTask>, String> {
    match response(status)? {
        ProjectResponse::Tasks {
            project_id: id,
            tasks,
        } if id == project_id => Ok(tasks),
        ProjectResponse::Tasks { project_id: id, .. } => {
            Err(format!("tasks of project {id}, want {project_id}"))
        }
        other => Err(wrong_kind("tasks", &other)),
    }
}

fn events_of(status: DaemonStatus, project_id: &str) -> Result<Vec<ProjectEvent>, String> {
    let events = match response(status)? {
        ProjectResponse::Events {
            project_id: id,
            events,
            ..
        } if id == project_id => events,
        ProjectResponse::Events { project_id: id, .. } => {
            return Err(format!("events of project {id}, want {project_id}"))
        }
        other => return Err(wrong_kind("events", &other)),
    };
    if let Some(e) = events.iter().find(|e| e.project_id != project_id) {
        return Err(format!("event of another project: {}", json(e)));
    }
    Ok(events)
}

fn report_of(status: DaemonStatus) -> Result<ProjectReport, String> {
    match response(status)? {
        ProjectResponse::Report { report } => Ok(report),
        other => Err(wrong_kind("report", &other)),
    }
}

// Small checks and helpers.

fn task<'a>(tasks: &'a [ProjectTask], id: &str) -> Result<&'a ProjectTask, String> {
    tasks
        .iter()
        .find(|t| t.id == id)
        .ok_or_else(|| format!("task {id} is not listed: {}", json(&tasks)))
}

fn increasing(events: &[ProjectEvent]) -> Result<(), String> {
    for pair in events.windows(2) {
        ensure!(
            pair[0].sequence < pair[1].sequence,
            "sequence {} is followed by {}",
            pair[0].sequence,
            pair[1].sequence
        );
    }
    Ok(())
}

/// SPEC section 2: project, task and run IDs are ULIDs (26 Crockford base32).
fn ulid(what: &str, id: &str) -> Result<(), String> {
    const CROCKFORD: &str = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    let valid = id.len() == 26
        && id
            .chars()
            .all(|c| CROCKFORD.contains(c.to_ascii_uppercase()))
        && id.as_bytes()[0] <= b'7';
    ensure!(valid, "{what} {id:?} is not a ULID");
    Ok(())
}

/// A fresh, absolute, clean workspace directory under `root`.
fn workspace(root: &Path, name: &str) -> Result<String, String> {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
    let dir = dir
        .canonicalize()
        .map_err(|e| format!("canonicalize {}: {e}", dir.display()))?;
    dir.into_os_string()
        .into_string()
        .map_err(|p| format!("workspace {p:?} is not UTF-8"))
}

/// The wire name of a command: its `action` tag.
fn action(command: &DaemonCommand) -> String {
    serde_json::to_value(command)
        .ok()
        .and_then(|v| v.get("action")?.as_str().map(String::from))
        .unwrap_or_default()
}

/// The wire name of a unit enum value, such as `ready`.
fn name<T: Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

fn json<T: Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|e| format!("<unencodable: {e}>"))
}
