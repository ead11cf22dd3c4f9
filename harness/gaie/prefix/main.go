// Command prefix runs GAIE's own OpenAI request parser and approximate prefix plugin on
// turn pairs: for each case read from standard input, one JSON object a line,
// {"block_size": B, "model": M, "request": {chat body of turn k}, "next": {chat body of turn
// k+1}}, a fresh plugin schedules turn k to one pod (recording its blocks there), then
// prepares turn k+1 and prints what the plugin gives that pod:
// {"matched": BLOCKS, "total": BLOCKS, "input_bytes": N} (the bytes it hashes, as its parsed
// messages marshal), or {"error": "..."}.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	k8stypes "k8s.io/apimachinery/pkg/types"

	fwkdl "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/datalayer"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/plugin"
	fwksched "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/scheduling"
	attrprefix "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/datalayer/attribute/prefix"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/requestcontrol/dataproducer/approximateprefix"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/requesthandling/parsers/openai"
)

type request struct {
	BlockSize int             `json:"block_size"`
	Model     string          `json:"model"`
	Request   json.RawMessage `json:"request"`
	Next      json.RawMessage `json:"next"`
}

type answer struct {
	Matched    int    `json:"matched"`
	Total      int    `json:"total"`
	InputBytes int    `json:"input_bytes"`
	Error      string `json:"error,omitempty"`
}

// handle is the least a plugin needs of the director: a context and the pods (one).
type handle struct {
	ctx  context.Context
	pods []k8stypes.NamespacedName
}

func (h *handle) Context() context.Context                         { return h.ctx }
func (h *handle) Plugin(string) plugin.Plugin                      { return nil }
func (h *handle) AddPlugin(string, plugin.Plugin)                  {}
func (h *handle) GetAllPlugins() []plugin.Plugin                   { return nil }
func (h *handle) GetAllPluginsWithNames() map[string]plugin.Plugin { return nil }
func (h *handle) PodList() []k8stypes.NamespacedName               { return h.pods }

type prefixPlugin interface {
	PrepareRequestData(ctx context.Context, request *fwksched.LLMRequest, pods []fwksched.Endpoint) error
	PreRequest(ctx context.Context, request *fwksched.LLMRequest, result *fwksched.SchedulingResult)
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 256<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	for in.Scan() {
		var r request
		var a answer
		if err := json.Unmarshal(in.Bytes(), &r); err != nil {
			a.Error = err.Error()
		} else if got, err := turn(r); err != nil {
			a.Error = err.Error()
		} else {
			a = got
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

func turn(r request) (answer, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	name := k8stypes.NamespacedName{Namespace: "default", Name: "decode-0"}
	params, _ := json.Marshal(map[string]any{
		"autoTune":               false,
		"blockSizeTokens":        r.BlockSize,
		"maxPrefixBlocksToMatch": 256,
		"lruCapacityPerServer":   31250,
	})
	p, err := approximateprefix.ApproxPrefixCacheFactory("prefix", params, &handle{ctx, []k8stypes.NamespacedName{name}})
	if err != nil {
		return answer{}, err
	}
	plug, ok := p.(prefixPlugin)
	if !ok {
		return answer{}, fmt.Errorf("the prefix plugin is not a data producer")
	}
	pod := fwksched.NewEndpoint(&fwkdl.EndpointMetadata{NamespacedName: name}, fwkdl.NewMetrics(), fwkdl.NewAttributes())
	pods := []fwksched.Endpoint{pod}
	parser := openai.NewOpenAIParser()
	first, err := llmRequest(ctx, parser, "turn-k", r.Model, r.Request)
	if err != nil {
		return answer{}, err
	}
	if err := plug.PrepareRequestData(ctx, first, pods); err != nil {
		return answer{}, err
	}
	total := matchOf(pod).TotalBlocks()
	plug.PreRequest(ctx, first, &fwksched.SchedulingResult{
		PrimaryProfileName: "default",
		ProfileResults:     map[string]*fwksched.ProfileRunResult{"default": {TargetEndpoints: pods}},
	})
	// The plugin records turn k's blocks on its own goroutine: wait until turn k finds all
	// of its own blocks on the pod.
	deadline := time.Now().Add(10 * time.Second)
	for total > 0 {
		again, err := llmRequest(ctx, parser, "turn-k-again", r.Model, r.Request)
		if err != nil {
			return answer{}, err
		}
		if err := plug.PrepareRequestData(ctx, again, pods); err != nil {
			return answer{}, err
		}
		if matchOf(pod).MatchBlocks() == total {
			break
		}
		if time.Now().After(deadline) {
			return answer{}, fmt.Errorf("turn k's blocks were never recorded")
		}
		time.Sleep(time.Millisecond)
	}
	next, err := llmRequest(ctx, parser, "turn-k+1", r.Model, r.Next)
	if err != nil {
		return answer{}, err
	}
	if err := plug.PrepareRequestData(ctx, next, pods); err != nil {
		return answer{}, err
	}
	m := matchOf(pod)
	input, err := json.Marshal(next.Body.ChatCompletions.Messages)
	if err != nil {
		return answer{}, err
	}
	return answer{Matched: m.MatchBlocks(), Total: m.TotalBlocks(), InputBytes: len(input)}, nil
}

func llmRequest(ctx context.Context, parser *openai.OpenAIParser, id, model string, body []byte) (*fwksched.LLMRequest, error) {
	// The path is what tells the parser a chat request, as Envoy passes it.
	parsed, err := parser.ParseRequest(ctx, body, map[string]string{":path": "/v1/chat/completions"})
	if err != nil {
		return nil, err
	}
	if parsed.ChatCompletions == nil {
		return nil, fmt.Errorf("not a chat completion request")
	}
	return &fwksched.LLMRequest{RequestId: id, TargetModel: model, Body: parsed}, nil
}

func matchOf(pod fwksched.Endpoint) *attrprefix.PrefixCacheMatchInfo {
	v, ok := pod.Get(attrprefix.PrefixCacheMatchInfoKey)
	if !ok {
		return attrprefix.NewPrefixCacheMatchInfo(0, 0, 0)
	}
	info, _ := v.(*attrprefix.PrefixCacheMatchInfo)
	if info == nil {
		return attrprefix.NewPrefixCacheMatchInfo(0, 0, 0)
	}
	return info
}
