package serve

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// MinSessionKeyBytes is the shortest session key accepted.
const MinSessionKeyBytes = 32

// ParseSessionKeys reads dashboard session keys (see Server.SessionKeys)
// from text: keys in hex, 32 bytes (64 hex digits) or more each, one per
// line or separated by commas; blank lines and lines starting with # are
// ignored. The first key signs new sessions; the others are still accepted,
// so that a key is rotated by adding the new key first, then removing the
// old one once its sessions have expired, 12 hours later. Its errors never
// repeat a key.
func ParseSessionKeys(text string) ([][]byte, error) {
	var keys [][]byte
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		for _, field := range strings.Split(line, ",") {
			key, err := decodeHexKey(strings.TrimSpace(field))
			if err != nil {
				return nil, fmt.Errorf("key %d (line %d): %w", len(keys)+1, n+1, err)
			}
			keys = append(keys, key)
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("no key: give at least one, such as the output of: openssl rand -hex 32")
	}
	return keys, nil
}

func decodeHexKey(s string) ([]byte, error) {
	key, err := hex.DecodeString(s)
	if err != nil || len(key) < MinSessionKeyBytes { // err would show a digit of the key
		return nil, fmt.Errorf("give at least %d bytes in hex (%d hex digits), such as the output of: openssl rand -hex 32", MinSessionKeyBytes, 2*MinSessionKeyBytes)
	}
	return key, nil
}

// ReadSessionKeys reads the session keys of the file path (see
// ParseSessionKeys), refusing a file that others than its owner may read.
func ReadSessionKeys(path string) ([][]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("session key file: %w", err)
	}
	if info.Mode().Perm()&0o007 != 0 {
		return nil, fmt.Errorf("session key file %s can be read by anyone (mode %v): chmod o-rwx %s", path, info.Mode().Perm(), path)
	}
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("session key file: %w", err)
	}
	keys, err := ParseSessionKeys(string(text))
	if err != nil {
		return nil, fmt.Errorf("session key file %s: %w", path, err)
	}
	return keys, nil
}

// ReadSecretFile reads a secret kept in a file (the OpenID client's
// secret), refusing a file that others than its owner may read: its text,
// trimmed.
func ReadSecretFile(path string) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if info.Mode().Perm()&0o007 != 0 {
		return "", fmt.Errorf("%s can be read by anyone (mode %v): chmod o-rwx %s", path, info.Mode().Perm(), path)
	}
	text, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	secret := strings.TrimSpace(string(text))
	if secret == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return secret, nil
}
