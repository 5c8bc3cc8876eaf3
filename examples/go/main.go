// photon from Go through cgo: three greedy requests stepped and polled to the end.
//
//	PKG_CONFIG_PATH=<prefix>/lib/pkgconfig go run . models/stories260K
package main

import (
	"fmt"
	"os"
	"strings"
)

func main() {
	modelDir := "models/stories260K"
	if len(os.Args) > 1 {
		modelDir = os.Args[1]
	}
	if err := run(modelDir); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(modelDir string) error {
	prompts := []string{
		"Once upon a time",
		"Lily and Ben were best friends. One day, they",
		"Tom saw a cat named Zoë 🐱 in the garden.",
	}
	engine, err := OpenCPU(modelDir, 64)
	if err != nil {
		return err
	}
	defer engine.Close()

	index := map[uint64]int{}
	for i, p := range prompts {
		id, err := engine.SubmitGreedy(p, 64)
		if err != nil {
			return err
		}
		index[id] = i
	}
	tokens := make([][]string, len(prompts))
	texts := make([]strings.Builder, len(prompts))
	for finished := 0; finished < len(prompts); {
		if err := engine.Step(); err != nil {
			return err
		}
		events, err := engine.Poll()
		if err != nil {
			return err
		}
		for _, ev := range events {
			i, ok := index[ev.RequestID]
			if !ok {
				continue
			}
			if ev.TokenID >= 0 {
				tokens[i] = append(tokens[i], fmt.Sprint(ev.TokenID))
			}
			texts[i].WriteString(ev.Text)
			if ev.Finish != 0 {
				finished++
			}
		}
	}
	for i := range prompts {
		fmt.Printf("request %d tokens: %s\n", i, strings.Join(tokens[i], " "))
		fmt.Printf("request %d text: %s\n", i, texts[i].String())
	}
	return nil
}
