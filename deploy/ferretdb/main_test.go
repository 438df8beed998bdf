package main

import (
	"net/url"
	"testing"
)

func TestSessionSettings(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]string
	}{
		{"postgres://127.0.0.1:5432/ferretdb", map[string]string{"plan_cache_mode": "force_custom_plan", "max_parallel_workers_per_gather": "0", "jit": "off"}},
		{"postgres://u:p@db:5432/ferretdb?sslmode=disable", map[string]string{"plan_cache_mode": "force_custom_plan", "max_parallel_workers_per_gather": "0", "jit": "off"}},
		// An operator's choice stays.
		{"postgres://db/ferretdb?plan_cache_mode=auto", map[string]string{"plan_cache_mode": "auto", "max_parallel_workers_per_gather": "0", "jit": "off"}},
		{"postgres://db/ferretdb?jit=on&max_parallel_workers_per_gather=2", map[string]string{"plan_cache_mode": "force_custom_plan", "max_parallel_workers_per_gather": "2", "jit": "on"}},
	} {
		got, err := withSessionSettings(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		parsed, err := url.Parse(got)
		if err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		for key, want := range tc.want {
			if value := parsed.Query().Get(key); value != want {
				t.Errorf("%s: %s %q, want %q", tc.in, key, value, want)
			}
		}
		in, _ := url.Parse(tc.in)
		for key := range in.Query() {
			if parsed.Query().Get(key) != in.Query().Get(key) {
				t.Errorf("%s: %s changed to %q", tc.in, key, parsed.Query().Get(key))
			}
		}
		if parsed.User.String() != in.User.String() || parsed.Host != in.Host || parsed.Path != in.Path {
			t.Errorf("%s: became %s", tc.in, got)
		}
	}
}
