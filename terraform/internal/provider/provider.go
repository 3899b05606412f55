// Package provider is the trawl Terraform/OpenTofu provider: the operator
// API of a region's gate (docs/operations.md, "The operator API") as
// resources and data sources (docs/terraform.md).
package provider

import (
	"context"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// Address is the provider's source address: configurations name it as
// trawlhq/trawl; it is installed from a filesystem mirror (docs/terraform.md).
const Address = "registry.opentofu.org/trawlhq/trawl"

type trawlProvider struct{ version string }

// New returns the provider's constructor.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &trawlProvider{version: version} }
}

type providerModel struct {
	Endpoint    types.String `tfsdk:"endpoint"`
	OperatorKey types.String `tfsdk:"operator_key"`
}

func (p *trawlProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "trawl"
	resp.Version = p.version
}

func (p *trawlProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A trawl deployment's operator API, through one region's gate. Cells are that region's; accounts, keys, plans and prices are every region's (the ledger replicates them).",
		Attributes: map[string]schema.Attribute{
			"endpoint": schema.StringAttribute{
				Optional:    true,
				Description: "The gate's base URL, e.g. https://eu.trawl.example (default $TRAWL_ENDPOINT).",
			},
			"operator_key": schema.StringAttribute{
				Optional:    true,
				Sensitive:   true,
				Description: "An operator key (default $TRAWL_OPERATOR_KEY). A customer's key is refused (403).",
			},
		},
	}
}

func (p *trawlProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	endpoint, key := os.Getenv("TRAWL_ENDPOINT"), os.Getenv("TRAWL_OPERATOR_KEY")
	if !cfg.Endpoint.IsNull() && !cfg.Endpoint.IsUnknown() {
		endpoint = cfg.Endpoint.ValueString()
	}
	if !cfg.OperatorKey.IsNull() && !cfg.OperatorKey.IsUnknown() {
		key = cfg.OperatorKey.ValueString()
	}
	if endpoint == "" || key == "" {
		resp.Diagnostics.AddError("trawl provider not configured",
			"set endpoint and operator_key (or TRAWL_ENDPOINT and TRAWL_OPERATOR_KEY)")
		return
	}
	c := newClient(endpoint, key)
	resp.ResourceData = c
	resp.DataSourceData = c
}

func (p *trawlProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{newCellResource, newAccountResource, newAPIKeyResource, newCallPriceResource, newPlanResource, newRecipeResource}
}

func (p *trawlProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{newCellsDataSource, newPricesDataSource}
}
