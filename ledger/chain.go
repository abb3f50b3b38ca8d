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
	h := sha256.New()
	var buf [binary.MaxVarintLen64]byte
	field := func(b []byte) {
		h.Write(buf[:binary.PutUvarint(buf[:], uint64(len(b)))])
		h.Write(b)
	}
	field([]byte(chainDomain))
	field(strconv.AppendUint(nil, sequence, 10))
	field([]byte(projectID))
	field([]byte(kind))
	field(strconv.AppendInt(nil, timestamp, 10))
	field(strconv.AppendInt(nil, timestampMs, 10))
	field([]byte(data))
	field(prev)
	return h.Sum(nil)
}
