package provider

import (
	"context"
	"fmt"
	"regexp"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// amountRe is a credit amount as the price table writes it: "2.000".
var amountRe = regexp.MustCompile(`^[0-9]+\.[0-9]{3}$`)

// callPriceResource is the base price of one call kind in the price table
// (replicated to every region through the ledger). The table always prices
// every kind, so destroy leaves the price as it is and only stops managing
// it.
type callPriceResource struct{ c *client }

func newCallPriceResource() resource.Resource { return &callPriceResource{} }

type callPriceModel struct {
	Kind types.String `tfsdk:"kind"`
	Base types.String `tfsdk:"base"`
}

func (r *callPriceResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_call_price"
}

func (r *callPriceResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "The base price of a call kind (scrape, batch, job, search, answer, extract, recipe, map, monitor_check, monitor_change) in every region. Destroy leaves the price as it is.",
		Attributes: map[string]schema.Attribute{
			"kind": schema.StringAttribute{Required: true, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
			"base": schema.StringAttribute{Required: true, Description: `Credits, with three decimals ("2.000").`},
		},
	}
}

func (r *callPriceResource) Configure(_ context.Context, req resource.ConfigureRequest, _ *resource.ConfigureResponse) {
	if c, ok := req.ProviderData.(*client); ok {
		r.c = c
	}
}

func (r *callPriceResource) set(ctx context.Context, m *callPriceModel) error {
	kind, base := m.Kind.ValueString(), m.Base.ValueString()
	if !amountRe.MatchString(base) {
		return fmt.Errorf("base %q: write credits with three decimals, e.g. \"2.000\"", base)
	}
	return r.c.updatePrices(ctx, func(t map[string]any) error {
		calls, _ := t["calls"].(map[string]any)
		call, ok := calls[kind].(map[string]any)
		if !ok {
			return fmt.Errorf("the price table has no call kind %q", kind)
		}
		call["base"] = base
		return nil
	})
}

func (r *callPriceResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m callPriceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.set(ctx, &m); err != nil {
		resp.Diagnostics.AddError("trawl_call_price "+m.Kind.ValueString(), err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *callPriceResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m callPriceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var pt priceTable
	if err := r.c.do(ctx, "GET", "/operator/v1/prices", nil, &pt); err != nil {
		resp.Diagnostics.AddError("trawl_call_price: read", err.Error())
		return
	}
	calls, _ := pt.Table["calls"].(map[string]any)
	call, ok := calls[m.Kind.ValueString()].(map[string]any)
	if !ok {
		resp.State.RemoveResource(ctx)
		return
	}
	base, _ := call["base"].(string)
	m.Base = types.StringValue(base)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *callPriceResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m callPriceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.set(ctx, &m); err != nil {
		resp.Diagnostics.AddError("trawl_call_price "+m.Kind.ValueString(), err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *callPriceResource) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {
	// The table prices every kind: the price stays as it is.
}
