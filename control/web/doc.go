// Package web is the daemon's local web UI and its /metrics, on one
// loopback HTTP listener: a service the daemon starts and stops with the
// others (`scv daemon --http 127.0.0.1:PORT`).
//
// # Pages
//
//   - / lists the projects (the ledger's summary rows).
//   - /p/{id} is a project: its summary, the task graph and the run
//     timeline (control/render's SVG), the tasks (a Retry button on a
//     failed one when the daemon gives a Handler), the runs, the report's
//     evidence, the chain head with its verify command, and the events,
//     newest first, EventsPerPage at a time; /p/{id}/report.html is its
//     self-contained HTML report (control/view) as a file to save.
//   - /questions lists the questions to the owner, the pending ones with
//     Yes and No buttons, which post to /questions/{id}/answer
//     (Questions.Answer, by "web UI"); a project's page shows the pending
//     ones too.
//   - /agents lists the live agents (Agents, the daemon's ACP agents),
//     oldest first: name, state, conversation, turn, how long idle,
//     background jobs, the task (linked to its run's row, #run-ID, or
//     to the runs table, #runs, on its project's page), the current run
//     and the last turn's stop reason; a project's page lists its own
//     live agents, each linked to its run.
//   - A project's page shows its work (scv project work), asked of the
//     daemon's Handler (project_work_status): its state and turns, what
//     it waits for, and each agent's state, task, run, turns and starts.
//   - /metrics is the daemon's Prometheus metrics (control/metrics).
//
// Each page's script (static/app.js, embedded like the style sheet; no
// build step, nothing from outside) asks /api/version every PollEvery
// whether what the page shows changed, and if so fetches the page again
// and swaps it in: a new event, or a live agent's new state, shows
// within two seconds, without a reload. The pages work without the script, but do not update.
//
// # Security
//
// SPEC §7, all of it (see guard for the order of the checks):
//
//   - Start refuses any address but 127.0.0.1, ::1 or localhost
//     (CheckAddr); localhost listens on 127.0.0.1.
//   - Each Start makes a random token (256 bits), written 0600 to
//     TokenFile, and the address with it to URLFile (Files names both,
//     beside the socket). Every request needs it: Authorization: Bearer,
//     or the cookie a first GET with ?token= trades it for (HttpOnly,
//     SameSite=Strict, then a redirect that drops it from the URL).
//     Without it: 401 and a body that says nothing of the ledger.
//   - The Host header must name the address listened on (DNS
//     rebinding); a write is a POST whose Origin is the UI's own; no
//     answer carries a CORS header.
//   - Every answer has Content-Security-Policy default-src 'self';
//     img-src 'self' data:; style-src 'self'; script-src 'self';
//     frame-ancestors 'none' (and base-uri 'none', form-action 'self'),
//     X-Content-Type-Options: nosniff, X-Frame-Options: DENY,
//     Referrer-Policy: same-origin and Cache-Control: no-store.
//   - All ledger text goes through html/template; the drawings are
//     control/render's, which escapes its text, with their inline
//     <style> dropped (render.StripStyle) for the same rules in the
//     linked style sheet, since the policy allows no inline style.
//
// docs/ui.md is the operator's account of it.
package web
