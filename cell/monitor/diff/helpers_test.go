package diff

import "strings"

func stringsReplace(s, old, new string) string { return strings.Replace(s, old, new, 1) }
func contains(s, sub string) bool              { return strings.Contains(s, sub) }
