package main

import (
	"net/url"
	"testing"
)

func TestWithCustomPlans(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://127.0.0.1:5432/ferretdb", "force_custom_plan"},
		{"postgres://u:p@db:5432/ferretdb?sslmode=disable", "force_custom_plan"},
		{"postgres://db/ferretdb?plan_cache_mode=auto", "auto"}, // an operator's choice stays
	} {
		got, err := withCustomPlans(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		parsed, err := url.Parse(got)
		if err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		if mode := parsed.Query().Get("plan_cache_mode"); mode != tc.want {
			t.Errorf("%s: plan_cache_mode %q, want %q", tc.in, mode, tc.want)
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
