package network

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"regexp"
	"testing"

	"github.com/qtool/qtool/admmq"
)

// TestCheckpointDeterministic: two runs of the same configuration write the same
// checkpoint bytes after every iteration (no map order, no wall-clock time in them).
func TestCheckpointDeterministic(t *testing.T) {
	var saved [2][][]byte
	for i := range saved {
		r, _, _ := newRun(t, admmq.IADMMQ, 2, func(b []byte) error {
			saved[i] = append(saved[i], bytes.Clone(b))
			return nil
		})
		if err := r.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if len(saved[0]) != 2 || len(saved[1]) != 2 {
		t.Fatalf("%d and %d checkpoints, want 2 each", len(saved[0]), len(saved[1]))
	}
	for it := range saved[0] {
		if !bytes.Equal(saved[0][it], saved[1][it]) {
			t.Errorf("iteration %d: two identical runs wrote different checkpoints", it+1)
		}
	}
	fp := Fingerprint{{"rho", "0.001"}, {"grid", "binary"}}
	if !bytes.Equal(Seal(saved[0][0], fp), Seal(saved[1][0], Fingerprint{fp[1], fp[0]})) {
		t.Error("Seal depends on the order of the fingerprint's settings")
	}
}

func TestSealUnseal(t *testing.T) {
	state := []byte("the run's state")
	fp := Fingerprint{{"model.sha256", "ab12"}, {"rho", "1"}, {"grid", "binary"}}
	sealed := Seal(state, fp)
	got, err := Unseal(sealed, fp)
	if err != nil || !bytes.Equal(got, state) {
		t.Fatalf("Unseal = %q, %v", got, err)
	}
	// Every single flipped byte is caught, in the header, the fingerprint, the state and
	// the checksum itself.
	for i := range sealed {
		bad := bytes.Clone(sealed)
		bad[i] ^= 0x01
		if _, err := Unseal(bad, fp); !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNotCheckpoint) {
			t.Fatalf("byte %d flipped: err %v, want ErrCorrupt", i, err)
		}
	}
	if _, err := Unseal(sealed[:len(sealed)-1], fp); !errors.Is(err, ErrCorrupt) {
		t.Errorf("truncated: err %v, want ErrCorrupt", err)
	}
	if _, err := Unseal([]byte("not a model"), fp); !errors.Is(err, ErrNotCheckpoint) {
		t.Errorf("another file: err %v, want ErrNotCheckpoint", err)
	}
	other := Fingerprint{{"model.sha256", "ab12"}, {"rho", "0.001"}, {"limit", "300"}}
	_, err = Unseal(sealed, other)
	var me *MismatchError
	if !errors.As(err, &me) {
		t.Fatalf("other settings: err %v, want a *MismatchError", err)
	}
	want := []SettingDiff{{"grid", "binary", ""}, {"limit", "", "300"}, {"rho", "1", "0.001"}}
	if len(me.Diffs) != len(want) {
		t.Fatalf("diffs %+v, want %+v", me.Diffs, want)
	}
	for i := range want {
		if me.Diffs[i] != want[i] {
			t.Errorf("diff %d = %+v, want %+v", i, me.Diffs[i], want[i])
		}
	}
}

// TestCheckpointErrorsTyped: each way a checkpoint can fail to resume is a typed error
// carrying the facts, and no message names a command-line flag (the caller owns those).
func TestCheckpointErrorsTyped(t *testing.T) {
	flag := regexp.MustCompile(`--[a-z]`)
	algos := Methods()
	var state []byte
	r, _, _ := newRun(t, algos[0], 1, func(b []byte) error { state = bytes.Clone(b); return nil })
	if err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	other, _, _ := newRun(t, algos[1], 1, nil)
	err := other.Restore(state)
	var me *MismatchError
	if !errors.As(err, &me) || len(me.Diffs) != 1 || me.Diffs[0] != (SettingDiff{"Algo", string(algos[0]), string(algos[1])}) {
		t.Errorf("restore into another algorithm: %v, want a *MismatchError on Algo", err)
	}
	checkNoFlag := func(err error) {
		t.Helper()
		if err == nil || flag.MatchString(err.Error()) {
			t.Errorf("error %v: want one that names no flag", err)
		}
	}
	checkNoFlag(err)

	fp := Fingerprint{{"model", "ab"}}
	sealed := Seal(state, fp)
	_, err = Unseal(sealed, Fingerprint{{"model", "cd"}})
	checkNoFlag(err)
	_, err = Unseal(sealed[:len(sealed)-1], fp)
	checkNoFlag(err)
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("truncated: %v, want ErrCorrupt", err)
	}

	// A checkpoint of another layout version, with a valid checksum.
	body := bytes.Clone(sealed[:len(sealed)-sha256.Size])
	binary.BigEndian.PutUint32(body[len(sealMagic):], checkpointVersion+1)
	sum := sha256.Sum256(body)
	_, err = Unseal(append(body, sum[:]...), fp)
	var ve *VersionError
	if !errors.As(err, &ve) || ve.Version != checkpointVersion+1 {
		t.Errorf("another version: %v, want a *VersionError for version %d", err, checkpointVersion+1)
	}
	checkNoFlag(err)

	err = r.Restore([]byte("not gob"))
	if !errors.Is(err, ErrNotCheckpoint) {
		t.Errorf("garbage: %v, want ErrNotCheckpoint", err)
	}
	checkNoFlag(err)
}
