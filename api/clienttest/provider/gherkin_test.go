package provider_test

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// A reader of exactly the Gherkin that OpenFeature's evaluation features
// use: Feature, Background, Scenario, Scenario Outline with Examples (tags
// and comments skipped), steps (Given, When, Then, And, But) and data
// tables. An outline becomes one scenario per row of its examples, its
// <placeholders> replaced.

// gherkinScenario is one scenario to run: the background's steps, then its
// own.
type gherkinScenario struct {
	Name  string // "Outline name #n (Examples name)" for a row of an outline
	Line  int    // of the Scenario line, or of the examples row
	Steps []gherkinStep
}

type gherkinStep struct {
	Text  string     // without its keyword
	Table [][]string // a data table, header first; nil when none
}

// parseGherkin reads a feature file into its scenarios.
func parseGherkin(path string) ([]gherkinScenario, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	type outline struct {
		name     string
		line     int
		steps    []gherkinStep
		isOut    bool
		examples []string // name of each Examples block
		tables   [][][]string
	}
	var (
		background []gherkinStep
		cur        *outline
		all        []*outline
		inExamples bool
		lastStep   *[]gherkinStep
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "", strings.HasPrefix(line, "#"), strings.HasPrefix(line, "@"):
			continue
		case strings.HasPrefix(line, "Feature:"):
			continue
		case strings.HasPrefix(line, "Background:"):
			inExamples = false
			lastStep = &background
		case strings.HasPrefix(line, "Scenario Outline:"), strings.HasPrefix(line, "Scenario:"):
			_, name, _ := strings.Cut(line, ":")
			cur = &outline{name: strings.TrimSpace(name), line: n, isOut: strings.HasPrefix(line, "Scenario Outline:")}
			all = append(all, cur)
			inExamples = false
			lastStep = &cur.steps
		case strings.HasPrefix(line, "Examples:"):
			if cur == nil || !cur.isOut {
				return nil, fmt.Errorf("%s:%d: Examples outside a Scenario Outline", path, n)
			}
			_, name, _ := strings.Cut(line, ":")
			cur.examples = append(cur.examples, strings.TrimSpace(name))
			cur.tables = append(cur.tables, nil)
			inExamples = true
		case strings.HasPrefix(line, "|"):
			row := tableRow(line)
			if inExamples {
				i := len(cur.tables) - 1
				cur.tables[i] = append(cur.tables[i], append(row, fmt.Sprint(n)))
				continue
			}
			if lastStep == nil || len(*lastStep) == 0 {
				return nil, fmt.Errorf("%s:%d: a table without a step", path, n)
			}
			st := &(*lastStep)[len(*lastStep)-1]
			st.Table = append(st.Table, row)
		default:
			kw, text, ok := strings.Cut(line, " ")
			switch kw {
			case "Given", "When", "Then", "And", "But":
			default:
				ok = false
			}
			if !ok || (lastStep == nil) || inExamples {
				return nil, fmt.Errorf("%s:%d: cannot read %q", path, n, line)
			}
			*lastStep = append(*lastStep, gherkinStep{Text: text})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	var out []gherkinScenario
	for _, o := range all {
		if !o.isOut {
			out = append(out, gherkinScenario{Name: o.name, Line: o.line, Steps: append(append([]gherkinStep(nil), background...), o.steps...)})
			continue
		}
		row := 0
		for i, table := range o.tables {
			if len(table) < 2 {
				continue // a header alone: no scenario
			}
			head := table[0][:len(table[0])-1]
			for _, cells := range table[1:] {
				row++
				line := cells[len(cells)-1]
				cells = cells[:len(cells)-1]
				if len(cells) != len(head) {
					return nil, fmt.Errorf("%s:%s: %d cells under %d headings", path, line, len(cells), len(head))
				}
				steps := append([]gherkinStep(nil), background...)
				for _, st := range o.steps {
					text := st.Text
					for j, h := range head {
						text = strings.ReplaceAll(text, "<"+h+">", cells[j])
					}
					steps = append(steps, gherkinStep{Text: text, Table: st.Table})
				}
				var ln int
				fmt.Sscan(line, &ln)
				out = append(out, gherkinScenario{Name: fmt.Sprintf("%s #%d (%s)", o.name, row, o.examples[i]), Line: ln, Steps: steps})
			}
		}
	}
	return out, nil
}

// tableRow splits "| a | b\|c |" into its cells, trimmed and unescaped
// (\| is |, \\ is \, \n a newline; any other backslash stays).
func tableRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	var cells []string
	var cell strings.Builder
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\\' && i+1 < len(line) && (line[i+1] == '|' || line[i+1] == '\\'):
			cell.WriteByte(line[i+1])
			i++
		case c == '\\' && i+1 < len(line) && line[i+1] == 'n':
			cell.WriteByte('\n')
			i++
		case c == '|':
			cells = append(cells, strings.TrimSpace(cell.String()))
			cell.Reset()
		default:
			cell.WriteByte(c)
		}
	}
	return cells
}
