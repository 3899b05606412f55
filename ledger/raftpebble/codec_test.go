package raftpebble

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestEncodedLogLen(t *testing.T) {
	logs := []raft.Log{
		{},
		{Term: 1<<63 + 5, Type: 255, Data: make([]byte, 127), Extensions: make([]byte, 128)},
		{Term: 127, Data: []byte{}, AppendedAt: time.Unix(-1<<40, 999999999)},
		{Term: 128, Extensions: make([]byte, 1<<14), AppendedAt: time.Now()},
	}
	for i, l := range logs {
		buf := make([]byte, encodedLogLen(&l))
		encodeLog(buf, &l) // panics if the length is short
		var got raft.Log
		if err := decodeLog(buf, l.Index, &got); err != nil {
			t.Errorf("log %d: decode: %v", i, err)
		}
		if d := sameLog(&got, &l); d != "" {
			t.Errorf("log %d: %s", i, d)
		}
	}
}

func TestDecodeLogRejects(t *testing.T) {
	good := make([]byte, encodedLogLen(&raft.Log{Term: 3, Data: []byte("abc")}))
	encodeLog(good, &raft.Log{Term: 3, Data: []byte("abc")})
	tests := map[string][]byte{
		"empty":          {},
		"version only":   {logCodecV1},
		"wrong version":  append([]byte{9}, good[1:]...),
		"no time flag":   {logCodecV1, 0, 3},
		"bad time flag":  {logCodecV1, 0, 3, 7, 0, 0},
		"nanos too big":  {logCodecV1, 0, 3, 1, 0, 0x80, 0x94, 0xeb, 0xdc, 0x03, 0, 0},
		"short data":     good[:len(good)-1],
		"trailing bytes": append(good[:len(good):len(good)], 0),
		"no extensions":  good[:len(good)-1-3],
	}
	for name, v := range tests {
		if err := decodeLog(v, 1, new(raft.Log)); err == nil {
			t.Errorf("%s: decoded %x without error", name, v)
		}
	}
}

// FuzzLogCodec checks that any entry survives encode and decode, and that
// decoding arbitrary bytes never panics.
func FuzzLogCodec(f *testing.F) {
	f.Add(uint64(1), uint8(0), []byte("data"), []byte(nil), int64(0), uint32(0), false, false)
	f.Add(uint64(1<<63), uint8(5), []byte{}, []byte("ext"), int64(1700000000), uint32(999999999), true, true)
	f.Fuzz(func(t *testing.T, term uint64, typ uint8, data, ext []byte, sec int64, nsec uint32, nilData, nilExt bool) {
		l := raft.Log{Index: 7, Term: term, Type: raft.LogType(typ), Data: data, Extensions: ext}
		if nilData {
			l.Data = nil
		} else if l.Data == nil {
			l.Data = []byte{}
		}
		if nilExt {
			l.Extensions = nil
		} else if l.Extensions == nil {
			l.Extensions = []byte{}
		}
		if sec != 0 || nsec != 0 {
			l.AppendedAt = time.Unix(sec, int64(nsec%1e9))
		}
		buf := make([]byte, encodedLogLen(&l))
		encodeLog(buf, &l)
		var got raft.Log
		if err := decodeLog(buf, 7, &got); err != nil {
			t.Fatalf("decode: %v", err)
		}
		if d := sameLog(&got, &l); d != "" {
			t.Fatal(d)
		}
		// The same bytes as a stored value with arbitrary damage.
		_ = decodeLog(data, 1, new(raft.Log))
		_ = decodeLog(append([]byte{logCodecV1}, data...), 1, new(raft.Log))
	})
}
