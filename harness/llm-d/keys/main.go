// Command keys prints llm-d's block keys, computed by llm-d's own token processor, for each
// case read from standard input: one JSON object a line,
// {"block_size": B, "hash_seed": S, "model": M, "tokens": [...]}; one line out per case,
// {"keys": [...]} (the keys as unsigned 64-bit integers) or {"error": "..."}.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"github.com/llm-d/llm-d-kv-cache/pkg/kvcache/kvblock"
)

type request struct {
	BlockSize int      `json:"block_size"`
	HashSeed  string   `json:"hash_seed"`
	Model     string   `json:"model"`
	Tokens    []uint32 `json:"tokens"`
}

type answer struct {
	Keys  []uint64 `json:"keys"`
	Error string   `json:"error,omitempty"`
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	// A case of a million token ids is some 11 MB of JSON.
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	for in.Scan() {
		var r request
		var a answer
		if err := json.Unmarshal(in.Bytes(), &r); err != nil {
			a.Error = err.Error()
		} else if keys, err := keysOf(r); err != nil {
			a.Error = err.Error()
		} else {
			a.Keys = keys
		}
		if a.Keys == nil {
			a.Keys = []uint64{}
		}
		if err := enc.Encode(a); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func keysOf(r request) ([]uint64, error) {
	processor, err := kvblock.NewChunkedTokenDatabase(&kvblock.TokenProcessorConfig{
		BlockSizeTokens: r.BlockSize,
		HashSeed:        r.HashSeed,
	})
	if err != nil {
		return nil, err
	}
	hashes, err := processor.TokensToKVBlockKeys(kvblock.EmptyBlockHash, r.Tokens, r.Model, nil)
	if err != nil {
		return nil, err
	}
	keys := make([]uint64, len(hashes))
	for i, h := range hashes {
		keys[i] = uint64(h)
	}
	return keys, nil
}
