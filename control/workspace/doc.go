// Package workspace checks a workspace against the machine: the reducer
// holds its form (reducer.CleanWorkspace: absolute, no control
// characters, cleaned), and Check adds that it is an existing directory
// (os.Stat, which follows symlinks). The control service, live agents and
// channel accounts check every workspace they are given with Check, so
// that one rule, with one error text, holds for all of them.
package workspace
