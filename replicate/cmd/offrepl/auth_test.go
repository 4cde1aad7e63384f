package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAuthFlags: the credential and TLS flags every job shares give
// client options, or a clear error naming the flag.
func TestAuthFlags(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := authFlags{user: "app", passwordFile: pw, sasl: "scram-sha-512", useTLS: true}
	if password, c, err := a.load(); err != nil || password != "secret" || c == nil {
		t.Fatalf("load: %q, %v, %v; want the password without its newline and a TLS config", password, c, err)
	}
	if opts, err := a.kafkaOptions(); err != nil || len(opts) != 2 {
		t.Fatalf("kafkaOptions: %d options, %v; want SASL and TLS", len(opts), err)
	}
	if opts, err := (&authFlags{creds: "x.creds", user: "u"}).natsOptions("nats://x"); err != nil || len(opts) != 3 {
		t.Fatalf("natsOptions: %d options, %v; want the dialer, credentials and user", len(opts), err)
	}
	if opts, err := (&authFlags{}).natsOptions("nats://x"); err != nil || len(opts) != 1 {
		t.Fatalf("no flags: %d options, %v; want the dialer alone", len(opts), err)
	}
	for _, c := range []struct {
		flags authFlags
		want  string
	}{
		{authFlags{sasl: "md5"}, "--sasl"},
		{authFlags{passwordFile: filepath.Join(dir, "missing")}, "--password-file"},
		{authFlags{tlsCA: filepath.Join(dir, "missing")}, "--tls-ca"},
		{authFlags{tlsCA: notPEM}, "no PEM certificate"},
		{authFlags{tlsCert: notPEM}, "go together"},
		{authFlags{tlsCert: notPEM, tlsKey: notPEM}, "--tls-cert"},
	} {
		if _, err := c.flags.kafkaOptions(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error with %q", c.flags, err, c.want)
		}
	}
}
