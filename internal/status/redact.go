package status

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxMessageBytes bounds one stored error message.
const MaxMessageBytes = 512

// urlPassword matches the password of user info in a URL (scheme://user:PASSWORD@).
var urlPassword = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://[^\s/:@]*):[^\s/@]*@`)

// Redact is what the page shows of an op's error. The text is the error the
// daemon's log prints for the op (`err`): errors are built without secret
// values (probes.SecretRef errors name the file or variable, probes dial URLs
// without user info, URL parse errors are dropped), so nothing is removed
// from it there. As a second line of defence a password in URL user info is
// masked as net/url's Redacted does, control characters become spaces, and
// the text is cut at MaxMessageBytes.
func Redact(msg string) string {
	if strings.Contains(msg, "@") && strings.Contains(msg, "://") {
		msg = urlPassword.ReplaceAllString(msg, "$1:xxxxx@")
	}
	cut := false
	if len(msg) > MaxMessageBytes {
		n := MaxMessageBytes
		for n > 0 && !utf8.RuneStart(msg[n]) {
			n--
		}
		msg, cut = msg[:n], true
	}
	if strings.IndexFunc(msg, unicode.IsControl) >= 0 {
		msg = strings.Map(func(r rune) rune {
			if unicode.IsControl(r) {
				return ' '
			}
			return r
		}, msg)
	}
	if cut {
		msg += "…"
	}
	return msg
}
