//go:build integration

// Package tls tests dbcanary against a store that speaks TLS with a CA the test
// makes: a private MinIO (the stack's binary, its own port and certs dir) over
// https. It checks that every op succeeds through the CA, that the certificate
// expiry gauge and the status page show the server certificate's not-after,
// and that a wrong CA, a host-name mismatch and an expired certificate fail
// with cause tls and a message that says which.
package tls

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/test/pki"
	"github.com/dbcanary/dbcanary/test/stack"
)

var binary, minioBin string

func TestMain(m *testing.M) {
	if _, err := stack.Script("minio", "install"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	minioBin = filepath.Join(stack.DataDir(), "bin", "minio")
	var remove func()
	binary, remove = stack.MustBuild("dbcanary-tls-")
	stack.Exit(m.Run(), remove)
}

// ca is a certificate authority made by the test (test/pki).
type ca = pki.CA

func newCA(t *testing.T, name string) *ca { return pki.NewCA(t, name) }

// issue writes public.crt and private.key (MinIO's names) for a server
// certificate valid from notBefore to notAfter, for 127.0.0.1 and localhost.
func issue(t *testing.T, c *ca, dir string, notBefore, notAfter time.Time) *x509.Certificate {
	t.Helper()
	return c.Issue(t, filepath.Join(dir, "public.crt"), filepath.Join(dir, "private.key"), "minio.dbcanary.test", notBefore, notAfter, x509.ExtKeyUsageServerAuth)
}

// minio is a private MinIO over https.
type minio struct {
	endpoint, userFile, passFile string
}

// startMinIO runs the stack's MinIO binary with certsDir on a free port and
// waits (generous deadline) until it answers its readiness check over TLS.
func startMinIO(t *testing.T, certsDir string) *minio {
	t.Helper()
	dir := t.TempDir()
	port, console := stack.FreePort(t), stack.FreePort(t)
	m := &minio{endpoint: fmt.Sprintf("127.0.0.1:%d", port), userFile: filepath.Join(dir, "user"), passFile: filepath.Join(dir, "pass")}
	pki.WriteFile(t, m.userFile, []byte("dbcanarytls"))
	pki.WriteFile(t, m.passFile, []byte("dbcanarytls-secret"))
	cmd := exec.Command(minioBin, "server", filepath.Join(dir, "data"), "--address", m.endpoint,
		"--console-address", fmt.Sprintf("127.0.0.1:%d", console), "--certs-dir", certsDir)
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER=dbcanarytls", "MINIO_ROOT_PASSWORD=dbcanarytls-secret", "MINIO_BROWSER=off", "MINIO_UPDATE=off")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // kill -9: its data is a temp dir
		_ = cmd.Wait()
	})
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := c.Get("https://" + m.endpoint + "/minio/health/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return m
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("private MinIO on %s not ready over https within 90 s: %v\n%s", m.endpoint, err, logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// target is an s3 target section against m with the given tls block.
func (m *minio) target(name, tlsBlock string) string {
	return fmt.Sprintf(`  - name: %s
    backend: s3
    ops: {put_4KiB: {rate: 2}, get_4KiB: {rate: 2}}
    s3:
      endpoint: https://%s
      access_key_id_file: %s
      secret_access_key_file: %s
      sizes: [4KiB]
      connect_timeout: 3s
      tls: %s
`, name, m.endpoint, m.userFile, m.passFile, tlsBlock)
}

func config(t *testing.T, targets ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "dbcanary.yaml")
	pki.WriteFile(t, p, []byte("global: {instance_id: tls-test, timeout: 5s}\ntargets:\n"+strings.Join(targets, "")))
	return p
}

func TestS3OverHTTPSCertExpiry(t *testing.T) {
	authority := newCA(t, "dbcanary test CA")
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	pki.WriteFile(t, caFile, authority.PEM)
	certs := t.TempDir()
	// Expires in 5 days: inside the default critical threshold (7 days).
	leaf := issue(t, authority, certs, time.Now().Add(-time.Hour), time.Now().Add(5*24*time.Hour).Truncate(time.Second))
	m := startMinIO(t, certs)

	cfg := config(t, m.target("s3-tls", "{ca_file: "+caFile+"}"))
	addr, logs := startDaemon(t, cfg)

	want := strconv.FormatInt(leaf.NotAfter.Unix(), 10)
	expiry := regexp.MustCompile(`(?m)^dbcanary_tls_earliest_cert_expiry_timestamp_seconds\{backend="s3",target="s3-tls"\} (\S+)$`)
	okGets := regexp.MustCompile(`(?m)^dbcanary_op_latency_seconds_count\{backend="s3",op="get_4KiB",result="ok",target="s3-tls"\} ([1-9]\d*)$`)
	var body string
	deadline := time.Now().Add(2 * time.Minute)
	for {
		body = tryGet("http://" + addr + "/metrics")
		e := expiry.FindStringSubmatch(body)
		if e != nil && okGets.MatchString(body) {
			if f, _ := strconv.ParseFloat(e[1], 64); strconv.FormatInt(int64(f), 10) != want {
				t.Fatalf("expiry gauge %s, want the server certificate's not-after %s", e[1], want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no successful get and expiry gauge over https within 2 min\n%s\n--- log\n%s", grep(body, "s3-tls"), logs.String())
		}
		time.Sleep(250 * time.Millisecond)
	}
	if strings.Contains(body, `cause="tls"`) && regexp.MustCompile(`op_failures_total\{[^}]*cause="tls"[^}]*\} [1-9]`).MatchString(body) {
		t.Errorf("tls failures counted against a good CA:\n%s", grep(body, `cause="tls"`))
	}

	var st struct {
		Targets []struct {
			Name    string
			TLSCert *struct {
				NotAfter time.Time `json:"not_after"`
				Subject  string
			} `json:"tls_cert"`
		}
	}
	if err := json.Unmarshal([]byte(get(t, "http://"+addr+"/status.json")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Targets) != 1 || st.Targets[0].TLSCert == nil || !st.Targets[0].TLSCert.NotAfter.Equal(leaf.NotAfter) ||
		!strings.Contains(st.Targets[0].TLSCert.Subject, "minio.dbcanary.test") {
		t.Errorf("/status.json tls_cert: %+v, want not_after %s of minio.dbcanary.test", st.Targets, leaf.NotAfter)
	}
	page := get(t, "http://"+addr+"/")
	if !strings.Contains(page, `class="cert soon"`) || !strings.Contains(page, "TLS certificate expires") || !strings.Contains(page, leaf.NotAfter.UTC().Format("2006-01-02")) {
		t.Errorf("status page does not flag the certificate expiring in 5 days:\n%s", grep(page, "cert"))
	}

	// The shipped rules on a real Prometheus: a certificate 5 days from
	// expiry is a page (critical), not also a ticket (warning).
	for _, a := range certAlerts(t, addr, "s3-tls") {
		if a.Labels["severity"] != "critical" || a.Labels["backend"] != "s3" {
			t.Errorf("certificate alert %v (%s), want only severity critical for backend s3", a.Labels, a.State)
		}
	}
}

// TestTLSFailuresSayWhich: `dbcanary once` against MinIO over https with a
// client that trusts another CA, one that expects another name, and a server
// whose certificate has expired: each fails with cause tls and says why.
func TestTLSFailuresSayWhich(t *testing.T) {
	authority, other := newCA(t, "dbcanary test CA"), newCA(t, "some other CA")
	dir := t.TempDir()
	caFile, otherFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "other.PEM")
	pki.WriteFile(t, caFile, authority.PEM)
	pki.WriteFile(t, otherFile, other.PEM)
	good, expired := t.TempDir(), t.TempDir()
	issue(t, authority, good, time.Now().Add(-time.Hour), time.Now().Add(90*24*time.Hour))
	issue(t, authority, expired, time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	mGood, mExpired := startMinIO(t, good), startMinIO(t, expired)

	cfg := config(t,
		mGood.target("good", "{ca_file: "+caFile+"}"),
		mGood.target("wrong-ca", "{ca_file: "+otherFile+"}"),
		mGood.target("wrong-name", "{ca_file: "+caFile+", server_name: s3.example.org}"),
		mExpired.target("expired", "{ca_file: "+caFile+"}"),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "once", "--config.file", cfg)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatal("once did not finish within 3 min")
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Errorf("once: %v, want exit 1 (ops failed)\n%s", err, errOut.String())
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[0] != "TARGET" {
			rows[f[0]] = append(rows[f[0]], line)
		}
	}
	for target, want := range map[string]string{
		"good":       "",
		"wrong-ca":   "certificate signed by unknown authority",
		"wrong-name": "not s3.example.org",
		"expired":    "certificate has expired",
	} {
		if len(rows[target]) == 0 {
			t.Errorf("%s: no row in\n%s", target, out.String())
		}
		for _, line := range rows[target] {
			f := strings.Fields(line)
			switch {
			case want == "" && f[3] != "ok":
				t.Errorf("%s: %s", target, line)
			case want != "" && (f[3] != "error" || f[5] != "tls" || !strings.Contains(line, want)):
				t.Errorf("%s: want cause tls saying %q, got: %s", target, want, line)
			}
		}
	}
	t.Logf("once:\n%s", out.String())
}

// tryGet is get for a daemon that may not listen yet: "" until it does.
func tryGet(url string) string {
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func grep(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
