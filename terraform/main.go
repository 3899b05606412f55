// Command terraform-provider-trawl is the Terraform/OpenTofu provider of a
// trawl deployment's operator API (docs/terraform.md): cells, API keys,
// plans and prices, through a region's gate with an operator key.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/trawlhq/trawl/terraform/internal/provider"
)

// Version is set at build time (-ldflags "-X main.Version=…").
var Version = "0.1.0"

func main() {
	debug := flag.Bool("debug", false, "run with support for debuggers (delve)")
	flag.Parse()
	err := providerserver.Serve(context.Background(), provider.New(Version), providerserver.ServeOpts{
		Address: provider.Address,
		Debug:   *debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}
