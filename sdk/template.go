package sdk

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

var placeholder = regexp.MustCompile(`{{\s*([A-Za-z][A-Za-z0-9_]*)\s*}}`)

// RenderTemplate replaces each {{name}} in tmpl with data[name]. A name
// data does not hold is an error naming it, so a typo never renders an
// empty value into a machine's configuration; a value is inserted as is.
func RenderTemplate(tmpl string, data map[string]string) (string, error) {
	var missing []string
	out := placeholder.ReplaceAllStringFunc(tmpl, func(m string) string {
		name := placeholder.FindStringSubmatch(m)[1]
		v, ok := data[name]
		if !ok {
			missing = append(missing, name)
			return m
		}
		return v
	})
	if len(missing) > 0 {
		sort.Strings(missing)
		return "", fmt.Errorf("the template uses %s, which the data does not hold", strings.Join(missing, ", "))
	}
	return out, nil
}
