package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// devOperatorKey is trawl dev's operator key (the operator API,
// docs/operations.md): TRAWL_OPERATOR_KEY, else the one kept in
// <data>/operator-key, else a new random one kept there. trawl dev adds it
// to the ledger as the gate does with TRAWL_OPERATOR_KEY.
func devOperatorKey(dataRoot string) (string, error) {
	key := os.Getenv("TRAWL_OPERATOR_KEY")
	path := filepath.Join(dataRoot, "operator-key")
	if key == "" {
		b, err := os.ReadFile(path)
		switch {
		case err == nil:
			key = strings.TrimSpace(string(b))
		case errors.Is(err, fs.ErrNotExist):
			key = "trawl_op_" + randomHex(24)
			if err := os.MkdirAll(dataRoot, 0o755); err != nil {
				return "", err
			}
			if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
				return "", fmt.Errorf("keep the operator key: %w", err)
			}
		default:
			return "", fmt.Errorf("read the operator key: %w", err)
		}
	}
	if len(key) < 16 || len(key) > 256 {
		return "", errors.New("TRAWL_OPERATOR_KEY must be 16 to 256 characters")
	}
	return key, nil
}
