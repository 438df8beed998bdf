// Command ferretdb runs FerretDB's embeddable package as a MongoDB-wire server for local,
// native runs and CI, where no MongoDB server exists. Production uses MongoDB 7.
//
// Flags:
//
//	-listen   TCP address (default 127.0.0.1:27017)
//	-handler  sqlite | postgresql (default sqlite)
//	-sqlite   directory for the SQLite backend (default .data/ferretdb)
//	-postgres PostgreSQL URL for the postgresql backend
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/FerretDB/FerretDB/ferretdb"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:27017", "TCP address to listen on")
	handler := flag.String("handler", "sqlite", "backend: sqlite or postgresql")
	sqliteDir := flag.String("sqlite", ".data/ferretdb", "directory for the SQLite backend")
	postgresURL := flag.String("postgres", "postgres://127.0.0.1:5432/ferretdb", "PostgreSQL URL for the postgresql backend")
	logLevel := flag.String("log-level", "warn", "debug, info, warn or error")
	flag.Parse()

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fail(err)
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	config := &ferretdb.Config{
		Listener: ferretdb.ListenerConfig{TCP: *listen},
		Logger:   logger,
		Handler:  *handler,
	}
	switch *handler {
	case "sqlite":
		dir, err := filepath.Abs(*sqliteDir)
		if err != nil {
			fail(err)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			fail(err)
		}
		// The SQLite backend takes a directory URI that must end with a slash.
		config.SQLiteURL = "file:" + dir + "/"
	case "postgresql":
		url, err := withSessionSettings(*postgresURL)
		if err != nil {
			fail(err)
		}
		config.PostgreSQLURL = url
	default:
		fail(fmt.Errorf("unknown handler %q (want sqlite or postgresql)", *handler))
	}

	server, err := ferretdb.New(config)
	if err != nil {
		fail(err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	go func() {
		<-ctx.Done()
		logger.Info("stopping")
	}()
	go keepIDLookupsIndexed(ctx, logger, *handler, strings.TrimPrefix(config.SQLiteURL, "file:"), *postgresURL)
	logger.Info("listening", "uri", *listen, "handler", *handler)
	if err := server.Run(ctx); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "ferretdb:", err)
	os.Exit(1)
}

// withSessionSettings sets how FerretDB's PostgreSQL sessions plan, unless the URL says
// otherwise (an operator's choice stays):
//
//   - plan_cache_mode=force_custom_plan: every statement is planned with its parameters.
//     FerretDB sends a pushed-down `_id` lookup as `_jsonb->$1 @> $2`, the key a parameter too:
//     a custom plan sees `_jsonb->'_id'` and uses the lookup index (id_index.go), a generic plan
//     cannot. PostgreSQL switches a prepared statement to its generic plan when that looks no
//     dearer, which it does while a table's statistics are those of a small table (until
//     autovacuum analyzes it, a minute or more after a burst of inserts): every lookup then
//     read the whole table (10,000 rows each, on a table just grown from one).
//   - max_parallel_workers_per_gather=0 and jit=off: PostgreSQL guesses that a `@>` on the
//     lookup index matches a fifth of the table, so on a large one it plans the lookup of one
//     row as a parallel bitmap scan with JIT compilation: on 1,000,000 records a lookup took
//     about 110 ms (starting workers, compiling) against 0.3 ms without, and a page of 1,000
//     records 14 s against 1.2 s at 100,000. FerretDB's statements are lookups, or scans whose
//     rows all go to FerretDB to be filtered there: neither gains from workers or JIT.
func withSessionSettings(postgresURL string) (string, error) {
	parsed, err := url.Parse(postgresURL)
	if err != nil {
		return "", fmt.Errorf("-postgres: %w", err)
	}
	query := parsed.Query()
	for _, setting := range [][2]string{{"plan_cache_mode", "force_custom_plan"}, {"max_parallel_workers_per_gather", "0"}, {"jit", "off"}} {
		if query.Get(setting[0]) == "" {
			query.Set(setting[0], setting[1])
		}
	}
	parsed.RawQuery = query.Encode()
	return parsed.String(), nil
}
