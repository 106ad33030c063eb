package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// headerHeight is the page's title block above the grid, in CSS pixels
// (board.css keeps it this tall).
const headerHeight = 80

// Shoot draws the board and writes the screenshot to o.Out; it returns what
// the page reported for each panel.
func Shoot(o Options) ([]PanelReport, error) {
	prom, err := loopbackURL(o.Prometheus)
	if err != nil {
		return nil, err
	}
	for _, f := range []string{"uPlot.iife.min.js", "uPlot.min.css"} {
		if _, err := os.Stat(filepath.Join(o.UPlot, f)); err != nil {
			return nil, fmt.Errorf("-uplot %s: no %s (run test/tools/uplot.sh install)", o.UPlot, f)
		}
	}
	plan, err := MakePlan(o.Plan)
	if err != nil {
		return nil, err
	}
	plan.Note = o.Note
	ln, err := listenLoopback(o.Listen)
	if err != nil {
		return nil, err
	}
	s := newServer(plan, prom, o.UPlot)
	srv := &http.Server{Handler: s.handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	if err := screenshot(o.Chromium, "http://"+ln.Addr().String()+"/", o.Out, plan.Width, plan.Height+headerHeight); err != nil {
		return nil, err
	}
	rs, err := s.Reports(10 * time.Second)
	if err != nil {
		return nil, err
	}
	return rs, checkPNG(o.Out, plan.Width)
}

// screenshot loads url in headless Chromium with a fresh profile and saves a
// PNG of a width x height window. The virtual time budget lets the page's
// queries finish before the picture is taken (virtual time stands still while
// a request is open).
func screenshot(chromium, url, out string, width, height int) error {
	profile, err := os.MkdirTemp("", "boardshot-chromium-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(profile)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + profile, "--hide-scrollbars", "--force-device-scale-factor=1",
		"--window-size=" + strconv.Itoa(width) + "," + strconv.Itoa(height),
		"--virtual-time-budget=60000", "--screenshot=" + out, url}
	cmd := exec.CommandContext(ctx, chromium, args...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("chromium: %v\n%s", err, errb.String())
	}
	return nil
}

// checkPNG checks the screenshot is a PNG as wide as the page.
func checkPNG(path string, width int) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		return fmt.Errorf("screenshot %s: %v", path, err)
	}
	if w := img.Bounds().Dx(); w != width {
		return errors.New("screenshot " + path + ": " + strconv.Itoa(w) + " px wide, want " + strconv.Itoa(width))
	}
	return nil
}
