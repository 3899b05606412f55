package regionauth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
)

// Sealing is how a cell puts a secret in the region's replicated queue
// (a background recipe run's inputs, which may carry the caller's
// session): AES-256-GCM under a key derived from a region key for the
// purpose, so the bytes on the other cells' disks say nothing to whoever
// reads them without the keyring. The primary key seals; every key
// opens, so a rotation does not strand what was sealed before it.

// ErrUnsealed is Open's answer for bytes no key of the ring opens.
var ErrUnsealed = errors.New("regionauth: sealed data does not open with any region key")

// Seal encrypts and authenticates plain for purpose (which Open must
// name the same).
func (k *Keys) Seal(purpose string, plain []byte) ([]byte, error) {
	aead, err := sealer(k.Primary(), purpose)
	if err != nil {
		return nil, err
	}
	out := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	rand.Read(out)
	return aead.Seal(out, out, plain, []byte(purpose)), nil
}

// Open is the plain text Seal sealed for purpose under any key of k.
func (k *Keys) Open(purpose string, sealed []byte) ([]byte, error) {
	for _, key := range k.keys {
		aead, err := sealer(key, purpose)
		if err != nil {
			return nil, err
		}
		if len(sealed) < aead.NonceSize() {
			return nil, ErrUnsealed
		}
		n := aead.NonceSize()
		if plain, err := aead.Open(nil, sealed[:n], sealed[n:], []byte(purpose)); err == nil {
			return plain, nil
		}
	}
	return nil, ErrUnsealed
}

// sealer is the AEAD of key for purpose: a key of its own, derived, so
// that the HMACs and the gossip's encryption never share one with it.
func sealer(key []byte, purpose string) (cipher.AEAD, error) {
	dk, err := hkdf.Key(sha256.New, key, nil, "trawl seal "+purpose, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(dk)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
