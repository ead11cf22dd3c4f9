// Command replay feeds a kvaudit capture (.frames) through llm-d's own event pool (its vLLM
// engine adapter, in-memory index and token processor), then scores lookups with llm-d's own
// longest-prefix scorer.
//
//	replay -frames FILE -block-size B [-hash-seed S] [-engine vllm|sglang] [-topic-filter P]
//	       [-endpoints A,B] [-derive FILE] < lookups
//
// Lookups on standard input, one JSON object a line: {"tokens": [...], "model": M}; or, with
// -derive FILE, every sequence a store of the capture ends (the parent's sequence and the
// store's tokens, for stores whose parent was stored before), written to FILE as a JSON list
// of such objects and looked up in that order. One line out per lookup: {"scores": {POD:
// SCORE}} (pods with a score above 0; every tier weighs 1). Messages whose topic does not
// start with -topic-filter ("kv@", llm-d's default) are left out, as llm-d's subscriber never
// receives them; messages llm-d's adapter cannot decode are said on standard error (llm-d
// drops them, logging at a level nothing prints). With -endpoints, only those pods are
// scored, as the scheduler asks llm-d's index about its endpoints (by address:port) when one
// socket serves every pod and each message's pod is the one its topic names.
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/llm-d/llm-d-kv-cache/pkg/kvcache"
	"github.com/llm-d/llm-d-kv-cache/pkg/kvcache/kvblock"
	"github.com/llm-d/llm-d-kv-cache/pkg/kvevents"
	"github.com/llm-d/llm-d-kv-cache/pkg/kvevents/engineadapter"
)

type lookup struct {
	Tokens []uint32 `json:"tokens"`
	Model  string   `json:"model"`
}

type answer struct {
	Scores map[string]float64 `json:"scores"`
}

func main() {
	frames := flag.String("frames", "", "the capture")
	blockSize := flag.Int("block-size", 16, "llm-d's blockSizeTokens")
	seed := flag.String("hash-seed", "", "llm-d's hashSeed")
	engine := flag.String("engine", "vllm", "llm-d's engine adapter")
	derive := flag.String("derive", "", "derive the lookups from the capture's stores into FILE")
	topicFilter := flag.String("topic-filter", "kv@", "llm-d's topicFilter: only topics starting with it are received")
	endpoints := flag.String("endpoints", "", "score only these pods (comma-separated), the scheduler's endpoints")
	flag.Parse()
	scored := sets.New[string]()
	if *endpoints != "" {
		scored.Insert(strings.Split(*endpoints, ",")...)
	}
	if err := run(*frames, *blockSize, *seed, *engine, *derive, *topicFilter, scored); err != nil {
		fmt.Fprintln(os.Stderr, "replay:", err)
		os.Exit(1)
	}
}

func run(path string, blockSize int, seed, engine, derive, topicFilter string, scored sets.Set[string]) error {
	ctx := context.Background()
	index, err := kvblock.NewInMemoryIndex(nil)
	if err != nil {
		return err
	}
	processor, err := kvblock.NewChunkedTokenDatabase(&kvblock.TokenProcessorConfig{
		BlockSizeTokens: blockSize,
		HashSeed:        seed,
	})
	if err != nil {
		return err
	}
	adapter, err := engineadapter.NewAdapter(engine)
	if err != nil {
		return err
	}
	// One worker: every message in the capture's order.
	pool := kvevents.NewPool(&kvevents.Config{Concurrency: 1, TopicFilter: topicFilter}, index, processor, adapter)
	pool.Start(ctx)
	messages, err := readFrames(path)
	if err != nil {
		return err
	}
	for _, m := range messages {
		if !strings.HasPrefix(m.Topic, topicFilter) {
			continue
		}
		// What the pool would log and drop, said here (its logger is silent).
		if _, _, _, err := adapter.ParseMessage(m); err != nil {
			fmt.Fprintf(os.Stderr, "replay: seq %d of %s: %v\n", m.Sequence, m.Topic, err)
		}
		pool.AddTask(m)
	}
	// Shutdown returns once the queued messages are processed.
	pool.Shutdown(ctx)
	var lookups []lookup
	if derive != "" {
		lookups = derived(messages, adapter, topicFilter)
		text, err := json.Marshal(lookups)
		if err != nil {
			return err
		}
		if err := os.WriteFile(derive, text, 0o644); err != nil {
			return err
		}
	} else {
		in := bufio.NewScanner(os.Stdin)
		in.Buffer(make([]byte, 1<<20), 64<<20)
		for in.Scan() {
			var l lookup
			if err := json.Unmarshal(in.Bytes(), &l); err != nil {
				return err
			}
			lookups = append(lookups, l)
		}
		if err := in.Err(); err != nil {
			return err
		}
	}

	// Every tier weighs 1: the score is the count of leading blocks a pod holds in any tier,
	// what kvaudit's index_tokens counts (llm-d's default weighs a CPU block 0.8).
	scorer := &kvcache.LongestPrefixScorer{}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	for _, l := range lookups {
		a := answer{Scores: map[string]float64{}}
		keys, err := processor.TokensToKVBlockKeys(kvblock.EmptyBlockHash, l.Tokens, l.Model, nil)
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			// An empty set: every pod the index holds.
			pods, err := index.Lookup(ctx, keys, scored)
			if err != nil {
				return err
			}
			scores, err := scorer.Score(ctx, keys, pods)
			if err != nil {
				return err
			}
			for pod, s := range scores {
				if s > 0 {
					a.Scores[pod] = s
				}
			}
		}
		if err := enc.Encode(a); err != nil {
			return err
		}
	}
	return nil
}

// derived gives every sequence a store of the capture ends, per pod, in the capture's order:
// the test's own reading of the stores (through llm-d's adapter), not the index's.
func derived(messages []*kvevents.RawMessage, adapter kvevents.EngineAdapter, topicFilter string) []lookup {
	type key struct {
		pod  string
		hash uint64
	}
	upTo := map[key][]uint32{}
	seen := map[string]bool{}
	var out []lookup
	for _, m := range messages {
		if !strings.HasPrefix(m.Topic, topicFilter) {
			continue
		}
		pod, model, batch, err := adapter.ParseMessage(m)
		if err != nil {
			continue
		}
		for _, e := range batch.Events {
			ev, ok := e.(*kvevents.BlockStoredEvent)
			if !ok || len(ev.BlockHashes) == 0 || len(ev.Tokens)%len(ev.BlockHashes) != 0 {
				continue
			}
			var tokens []uint32
			if ev.ParentHash != 0 {
				parent, ok := upTo[key{pod, ev.ParentHash}]
				if !ok {
					continue
				}
				tokens = append(tokens, parent...)
			}
			per := len(ev.Tokens) / len(ev.BlockHashes)
			for i, h := range ev.BlockHashes {
				tokens = append(tokens, ev.Tokens[i*per:(i+1)*per]...)
				upTo[key{pod, h}] = append([]uint32(nil), tokens...)
			}
			if ev.LoraName != nil && *ev.LoraName != "" {
				model = *ev.LoraName
			}
			id := fmt.Sprint(model, tokens)
			if !seen[id] {
				seen[id] = true
				out = append(out, lookup{Tokens: tokens, Model: model})
			}
		}
	}
	return out
}

// readFrames reads kvaudit's capture layout: repeated {u32 BE topic length, topic, u64 BE
// sequence, u32 BE payload length, payload}.
func readFrames(path string) ([]*kvevents.RawMessage, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	var out []*kvevents.RawMessage
	for {
		var n [4]byte
		if _, err := io.ReadFull(r, n[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		topic := make([]byte, binary.BigEndian.Uint32(n[:]))
		var seq [8]byte
		if _, err := io.ReadFull(r, topic); err != nil {
			return nil, err
		}
		if _, err := io.ReadFull(r, seq[:]); err != nil {
			return nil, err
		}
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return nil, err
		}
		payload := make([]byte, binary.BigEndian.Uint32(n[:]))
		if _, err := io.ReadFull(r, payload); err != nil {
			return nil, err
		}
		out = append(out, &kvevents.RawMessage{
			Topic:    string(topic),
			Sequence: binary.BigEndian.Uint64(seq[:]),
			Payload:  payload,
		})
	}
}
