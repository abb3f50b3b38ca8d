package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"os"
)

// walInfo is what a write-ahead log file holds
// (https://www.sqlite.org/fileformat.html#the_write_ahead_log).
type walInfo struct {
	// Size is the file's size: SQLite reuses a WAL file from its start
	// after a checkpoint and does not shrink it (unless journal_size_limit
	// says so), so this is the high-water mark.
	Size int64
	// PageSize is the database page size the header names.
	PageSize int
	// Frames is the number of frames in use: the valid frames from the
	// start (the header's salts, an unbroken checksum chain) up to the
	// last commit frame among them. Frames of earlier generations of the
	// file, left behind the current one, do not count.
	Frames int
}

// Live is the part of the file in use, in bytes.
func (w walInfo) Live() int64 {
	if w.Frames == 0 {
		return 0
	}
	return walHeaderSize + int64(w.Frames)*int64(walFrameHeaderSize+w.PageSize)
}

const (
	walHeaderSize      = 32
	walFrameHeaderSize = 24
)

// readWAL reads the WAL file at path. A missing file is an empty WAL. The
// file may be appended to while it is read: a frame caught half written
// fails its checksum and ends the count there.
func readWAL(path string) (walInfo, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return walInfo{}, nil
	}
	if err != nil {
		return walInfo{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return walInfo{}, err
	}
	info := walInfo{Size: fi.Size()}
	r := bufio.NewReaderSize(f, 1<<20)
	var hdr [walHeaderSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return info, nil // empty or shorter than a header: no frames
	}
	be := binary.BigEndian
	var order binary.ByteOrder
	switch be.Uint32(hdr[0:]) {
	case 0x377f0682:
		order = binary.LittleEndian
	case 0x377f0683:
		order = binary.BigEndian
	default:
		return info, errors.New("not a WAL file (bad magic)")
	}
	info.PageSize = int(be.Uint32(hdr[8:]))
	if info.PageSize == 1 {
		info.PageSize = 65536
	}
	s0, s1 := walChecksum(order, 0, 0, hdr[:24])
	if s0 != be.Uint32(hdr[24:]) || s1 != be.Uint32(hdr[28:]) {
		return info, nil // a header being rewritten: no valid frames
	}
	salt1, salt2 := be.Uint32(hdr[16:]), be.Uint32(hdr[20:])
	frame := make([]byte, walFrameHeaderSize+info.PageSize)
	for n := 1; ; n++ {
		if _, err := io.ReadFull(r, frame); err != nil {
			return info, nil
		}
		if be.Uint32(frame[8:]) != salt1 || be.Uint32(frame[12:]) != salt2 {
			return info, nil
		}
		s0, s1 = walChecksum(order, s0, s1, frame[:8])
		s0, s1 = walChecksum(order, s0, s1, frame[walFrameHeaderSize:])
		if s0 != be.Uint32(frame[16:]) || s1 != be.Uint32(frame[20:]) {
			return info, nil
		}
		if be.Uint32(frame[4:]) != 0 { // a commit frame
			info.Frames = n
		}
	}
}

// walChecksum continues SQLite's WAL checksum (s0, s1) over b, whose
// length is a multiple of 8.
func walChecksum(order binary.ByteOrder, s0, s1 uint32, b []byte) (uint32, uint32) {
	for i := 0; i+8 <= len(b); i += 8 {
		s0 += order.Uint32(b[i:]) + s1
		s1 += order.Uint32(b[i+4:]) + s0
	}
	return s0, s1
}
