package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// authFlags are the credential and TLS flags every job takes, passed
// through to the engine's client library.
type authFlags struct {
	creds, user, passwordFile, sasl string
	useTLS                          bool
	tlsCA, tlsCert, tlsKey          string
	nats                            *natsDialer // set by natsOptions
}

func (a *authFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&a.creds, "creds", "", "NATS credentials `FILE` (JWT and nkey seed)")
	fs.StringVar(&a.user, "user", "", "`USER` name: NATS user, or Kafka SASL user")
	fs.StringVar(&a.passwordFile, "password-file", "", "read the password from `FILE` (not a flag: flags show in ps)")
	fs.StringVar(&a.sasl, "sasl", "", "Kafka SASL `MECHANISM`: plain, scram-sha-256 or scram-sha-512")
	fs.BoolVar(&a.useTLS, "tls", false, "connect with TLS (implied by --tls-ca and --tls-cert)")
	fs.StringVar(&a.tlsCA, "tls-ca", "", "trust the certificate authorities in PEM `FILE` (default: the system's)")
	fs.StringVar(&a.tlsCert, "tls-cert", "", "client certificate PEM `FILE`, for mutual TLS (with --tls-key)")
	fs.StringVar(&a.tlsKey, "tls-key", "", "client key PEM `FILE`")
}

// natsOptions returns the nats.Options for the flags: credentials, user
// and password, TLS, and a dialer that keeps why the servers at urls
// could not be reached (a.nats).
func (a *authFlags) natsOptions(urls string) ([]nats.Option, error) {
	password, tlsConfig, err := a.load()
	if err != nil {
		return nil, err
	}
	a.nats = newNATSDialer(urls)
	opts := []nats.Option{nats.SetCustomDialer(a.nats)}
	if a.creds != "" {
		opts = append(opts, nats.UserCredentials(a.creds))
	}
	if a.user != "" {
		opts = append(opts, nats.UserInfo(a.user, password))
	}
	if tlsConfig != nil {
		opts = append(opts, nats.Secure(tlsConfig))
	}
	return opts, nil
}

// kafkaOptions returns the kgo options for the flags: SASL, TLS.
func (a *authFlags) kafkaOptions() ([]kgo.Opt, error) {
	password, tlsConfig, err := a.load()
	if err != nil {
		return nil, err
	}
	var opts []kgo.Opt
	switch a.sasl {
	case "":
	case "plain":
		opts = append(opts, kgo.SASL(plain.Auth{User: a.user, Pass: password}.AsMechanism()))
	case "scram-sha-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: a.user, Pass: password}.AsSha256Mechanism()))
	case "scram-sha-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: a.user, Pass: password}.AsSha512Mechanism()))
	default:
		return nil, fmt.Errorf("--sasl %q: want plain, scram-sha-256 or scram-sha-512", a.sasl)
	}
	if tlsConfig != nil {
		opts = append(opts, kgo.DialTLSConfig(tlsConfig))
	}
	return opts, nil
}

// load reads the password file and builds the TLS configuration (nil
// when no TLS flag is given).
func (a *authFlags) load() (password string, c *tls.Config, err error) {
	if a.passwordFile != "" {
		b, err := os.ReadFile(a.passwordFile)
		if err != nil {
			return "", nil, fmt.Errorf("--password-file: %w", err)
		}
		password = strings.TrimRight(string(b), "\r\n")
	}
	if !a.useTLS && a.tlsCA == "" && a.tlsCert == "" && a.tlsKey == "" {
		return password, nil, nil
	}
	c = &tls.Config{MinVersion: tls.VersionTLS12}
	if a.tlsCA != "" {
		pem, err := os.ReadFile(a.tlsCA)
		if err != nil {
			return "", nil, fmt.Errorf("--tls-ca: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return "", nil, fmt.Errorf("--tls-ca %s: no PEM certificate", a.tlsCA)
		}
	}
	if (a.tlsCert == "") != (a.tlsKey == "") {
		return "", nil, errors.New("--tls-cert and --tls-key go together")
	}
	if a.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(a.tlsCert, a.tlsKey)
		if err != nil {
			return "", nil, fmt.Errorf("--tls-cert: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return password, c, nil
}
