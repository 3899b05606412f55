package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/trawlhq/trawl/cmd/trawl/client"
)

// config is the file `trawl login` writes: os.UserConfigDir()/trawl/config.json,
// mode 0600 (it holds the key).
type config struct {
	URL string `json:"url,omitempty"`
	Key string `json:"key,omitempty"`
}

// configFile is the config file's path: $TRAWL_CONFIG, else
// os.UserConfigDir()/trawl/config.json.
func (a *app) configFile() string {
	if a.configPath != "" {
		return a.configPath
	}
	if p := os.Getenv("TRAWL_CONFIG"); p != "" {
		return p
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "trawl", "config.json")
}

func loadConfig(path string) (config, error) {
	var c config
	if path == "" {
		return c, errors.New("no user config directory")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	return c, json.Unmarshal(b, &c)
}

// saveConfig writes c with mode 0600 in a 0700 directory, through a
// temporary file renamed over the old one.
func saveConfig(path string, c config) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func (a *app) loginCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "login",
		Short: "check a key against a gate and save both in the config file (mode 0600)",
		Long: `login checks the key (--key, else $TRAWL_API_KEY, else asked for on the
terminal or read as one line from stdin) against the gate (--url, else
$TRAWL_URL, else http://127.0.0.1:8080) and saves both in
os.UserConfigDir()/trawl/config.json ($TRAWL_CONFIG overrides the path),
mode 0600.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := a.configFile()
			if path == "" {
				return errors.New("no user config directory ($HOME or $XDG_CONFIG_HOME); set TRAWL_CONFIG")
			}
			old, _ := loadConfig(path)
			url := first(a.url, os.Getenv("TRAWL_URL"), old.URL, "http://127.0.0.1:8080")
			key := first(a.key, os.Getenv("TRAWL_API_KEY"))
			if key == "" {
				var err error
				if key, err = a.readKey(); err != nil {
					return err
				}
			}
			if key == "" {
				return usagef("no key given")
			}
			a.c = &client.Client{URL: url, Key: key}
			var bal struct{ Account, Plan, Balance string }
			r, err := a.call(cmd.Context(), "GET", "/v1/billing/balance", nil)
			if err != nil {
				return err
			}
			if err := json.Unmarshal(r.Body, &bal); err != nil {
				return fmt.Errorf("the gate's balance answer: %w", err)
			}
			if err := saveConfig(path, config{URL: url, Key: key}); err != nil {
				return err
			}
			if a.human() {
				fmt.Fprintf(a.stdout, "logged in to %s as %s (plan %s, balance %s); saved in %s\n", url, bal.Account, bal.Plan, bal.Balance, path)
				return nil
			}
			return a.printValue(map[string]any{"url": url, "account": bal.Account, "plan": bal.Plan, "balance": bal.Balance, "config": path})
		},
	}
}

// readKey asks for the key on a terminal (not echoed), or reads one line
// of stdin.
func (a *app) readKey() (string, error) {
	if f, ok := a.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(a.stderr, "API key: ")
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(a.stderr)
		return strings.TrimSpace(string(b)), err
	}
	line, err := bufio.NewReader(a.stdin).ReadString('\n')
	if err != nil && line == "" {
		return "", usagef("no key on stdin")
	}
	return strings.TrimSpace(line), nil
}
