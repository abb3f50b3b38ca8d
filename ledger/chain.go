package ledger

import (
	"crypto/sha256"
	"encoding/binary"
	"strconv"
)

// HashSize is the length of an event's chain hash.
const HashSize = sha256.Size

// chainDomain separates the ledger's event hashes from any other SHA-256
// use, and names the encoding's version.
const chainDomain = "scv-ledger-event-v1"

// ChainHash is an event's hash: SHA-256 over a canonical encoding of its
// sequence, project, kind, timestamps, data and the hash of the previous
// event of the same project (empty for a project's first event). Each field
// is written as its length (uvarint) and its bytes, numbers in decimal, so
// that no two different events encode alike:
//
//	"scv-ledger-event-v1", sequence, project_id, kind, timestamp,
//	timestamp_ms, data, prev
//
// Changing any of them, or the order of a project's events, changes every
// hash from there on.
func ChainHash(prev []byte, sequence uint64, projectID, kind string, timestamp, timestampMs int64, data string) []byte {
	// The whole encoding is built in one buffer (on the stack for an
	// event of ordinary size) and hashed at once.
	var stack [512]byte
	b := stack[:0]
	field := func(s []byte) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	fieldString := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	var digits [20]byte
	fieldString(chainDomain)
	field(strconv.AppendUint(digits[:0], sequence, 10))
	fieldString(projectID)
	fieldString(kind)
	field(strconv.AppendInt(digits[:0], timestamp, 10))
	field(strconv.AppendInt(digits[:0], timestampMs, 10))
	fieldString(data)
	field(prev)
	sum := sha256.Sum256(b)
	return sum[:]
}
