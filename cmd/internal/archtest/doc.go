// Package archtest holds no code, only tests: the guards of the arrows
// between the module's packages (docs/architecture.md), read from
// `go list`. They check that
//
//   - no package outside the drivers imports database/sql, sqlx,
//     modernc.org/sqlite or pgx (TestNoSQLOutsideDrivers);
//   - control/api, the wire's vocabulary, reaches no package of the module
//     but the reducer (and what the reducer reaches): it knows no storage
//     (TestVocabularyKnowsNoStorage);
//   - no subsystem under control/ but control/daemon imports the socket
//     server, control, and control stays under 3,300 lines
//     (TestSubsystemsDoNotImportTheWire).
package archtest
