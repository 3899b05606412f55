package raftpebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"time"

	"github.com/hashicorp/raft"
)

// A log value is, in order:
//
//	version   1 byte (logCodecV1)
//	type      1 byte (raft.LogType)
//	term      uvarint
//	appended  1 byte: 0 for the zero time, else 1 followed by
//	          varint Unix seconds and uvarint nanoseconds
//	data      uvarint len+1 (0 means nil), then the bytes
//	ext       uvarint len+1 (0 means nil), then the bytes
//
// The index is not repeated: it is the key. AppendedAt keeps its instant but
// not its location or monotonic reading, which raft never relies on.
const logCodecV1 = 1

var errCorrupt = errors.New("corrupt log entry")

func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

func varintLen(x int64) int {
	ux := uint64(x) << 1
	if x < 0 {
		ux = ^ux
	}
	return uvarintLen(ux)
}

// encodedLogLen is the exact length encodeLog writes for l.
func encodedLogLen(l *raft.Log) int {
	n := 2 + uvarintLen(l.Term) + 1
	if !l.AppendedAt.IsZero() {
		n += varintLen(l.AppendedAt.Unix()) + uvarintLen(uint64(l.AppendedAt.Nanosecond()))
	}
	n += bytesLen(l.Data) + bytesLen(l.Extensions)
	return n
}

func bytesLen(b []byte) int {
	if b == nil {
		return 1
	}
	return uvarintLen(uint64(len(b))+1) + len(b)
}

// encodeLog writes l into dst, which must be exactly encodedLogLen(l) long.
func encodeLog(dst []byte, l *raft.Log) {
	dst[0] = logCodecV1
	dst[1] = byte(l.Type)
	n := 2 + binary.PutUvarint(dst[2:], l.Term)
	if l.AppendedAt.IsZero() {
		dst[n] = 0
		n++
	} else {
		dst[n] = 1
		n++
		n += binary.PutVarint(dst[n:], l.AppendedAt.Unix())
		n += binary.PutUvarint(dst[n:], uint64(l.AppendedAt.Nanosecond()))
	}
	n += putBytes(dst[n:], l.Data)
	putBytes(dst[n:], l.Extensions)
}

func putBytes(dst, b []byte) int {
	if b == nil {
		dst[0] = 0
		return 1
	}
	n := binary.PutUvarint(dst, uint64(len(b))+1)
	return n + copy(dst[n:], b)
}

// decodeLog fills out from v, the stored value of the entry at index. Data
// and Extensions are copied (into one allocation), so out does not alias v.
func decodeLog(v []byte, index uint64, out *raft.Log) error {
	if len(v) < 2 || v[0] != logCodecV1 {
		return errCorrupt
	}
	typ := raft.LogType(v[1])
	p := v[2:]
	term, n := binary.Uvarint(p)
	if n <= 0 || len(p) == n {
		return errCorrupt
	}
	p = p[n:]
	var appended time.Time
	switch p[0] {
	case 0:
		p = p[1:]
	case 1:
		p = p[1:]
		sec, n := binary.Varint(p)
		if n <= 0 {
			return errCorrupt
		}
		p = p[n:]
		nsec, n := binary.Uvarint(p)
		if n <= 0 || nsec >= uint64(time.Second) {
			return errCorrupt
		}
		p = p[n:]
		appended = time.Unix(sec, int64(nsec)).UTC()
	default:
		return errCorrupt
	}
	data, p, err := sliceBytes(p)
	if err != nil {
		return err
	}
	ext, p, err := sliceBytes(p)
	if err != nil {
		return err
	}
	if len(p) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", errCorrupt, len(p))
	}

	*out = raft.Log{Index: index, Term: term, Type: typ, AppendedAt: appended}
	if data == nil && ext == nil {
		return nil
	}
	buf := make([]byte, len(data)+len(ext))
	if data != nil {
		out.Data = buf[:len(data):len(data)]
		copy(out.Data, data)
	}
	if ext != nil {
		out.Extensions = buf[len(data):]
		copy(out.Extensions, ext)
	}
	return nil
}

// sliceBytes reads one length-prefixed field, returning it (aliasing p, nil
// if it was written as nil) and the rest of p.
func sliceBytes(p []byte) (b, rest []byte, err error) {
	l, n := binary.Uvarint(p)
	if n <= 0 {
		return nil, nil, errCorrupt
	}
	p = p[n:]
	if l == 0 {
		return nil, p, nil
	}
	l--
	if l > uint64(len(p)) {
		return nil, nil, errCorrupt
	}
	return p[:l:l], p[l:], nil
}
