// Command example is a small app that evaluates a feature with the rollout
// client. The client's tests build it with CGO_ENABLED=0, to keep the
// client free of the server's dependencies.
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/rollout/rollout/api/client"
)

func main() {
	ctx := context.Background()
	c, err := client.New(ctx, client.Config{URL: "http://127.0.0.1:8080", Token: os.Getenv("ROLLOUT_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ev, err := c.Evaluate("checkout", "user1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ev.Bucket, string(ev.Value), ev.Version, ev.Reason)
}
