package config_test

import (
	"os"
	"strings"
	"testing"

	"github.com/baton-go/baton/config"
)

// TestReferenceCoversEveryKey checks that the reference in doc.go and
// docs/configuration.md names every key and its environment variable.
func TestReferenceCoversEveryKey(t *testing.T) {
	for _, file := range []string{"doc.go", "../docs/configuration.md"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		for _, k := range config.Keys() {
			if !strings.Contains(text, k) {
				t.Errorf("%s does not mention key %s", file, k)
			}
			if env := config.EnvName("BATON_", k); !strings.Contains(text, env) {
				t.Errorf("%s does not mention %s", file, env)
			}
		}
	}
}
