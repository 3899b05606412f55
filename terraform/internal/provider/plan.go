package provider

import (
	"context"
	"fmt"
	"net/http"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// planResource is a plan's limits and monthly credit (part of the price
// table). The plans are fixed (free, supporter): destroy leaves the plan as
// it is.
type planResource struct{ c *client }

func newPlanResource() resource.Resource { return &planResource{} }

type planModel struct {
	Name           types.String `tfsdk:"name"`
	RatePerMinute  types.Int64  `tfsdk:"rate_per_minute"`
	Concurrency    types.Int64  `tfsdk:"concurrency"`
	Keys           types.Int64  `tfsdk:"keys"`
	MonthlyCap     types.String `tfsdk:"monthly_cap"`
	MonthlyCredits types.String `tfsdk:"monthly_credits"`
}

func (r *planResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_plan"
}

func (r *planResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A plan's limits (0: none) and monthly credit, in every region. Rate and concurrency reach a gate's rate limiter at its next config reload or restart; the rest at once. Destroy leaves the plan as it is.",
		Attributes: map[string]schema.Attribute{
			"name":            schema.StringAttribute{Required: true, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}, Description: "free or supporter."},
			"rate_per_minute": schema.Int64Attribute{Required: true},
			"concurrency":     schema.Int64Attribute{Required: true},
			"keys":            schema.Int64Attribute{Required: true},
			"monthly_cap":     schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("0.000"), Description: `A new account's spend cap ("0.000": none).`},
			"monthly_credits": schema.StringAttribute{Required: true, Description: `Credits granted on the 1st ("100.000").`},
		},
	}
}

func (r *planResource) Configure(_ context.Context, req resource.ConfigureRequest, _ *resource.ConfigureResponse) {
	if c, ok := req.ProviderData.(*client); ok {
		r.c = c
	}
}

func (r *planResource) put(ctx context.Context, m *planModel) error {
	for _, a := range []string{m.MonthlyCap.ValueString(), m.MonthlyCredits.ValueString()} {
		if !amountRe.MatchString(a) {
			return fmt.Errorf("%q: write credits with three decimals, e.g. \"100.000\"", a)
		}
	}
	var err error
	for range 5 {
		var ps plans
		if err = r.c.do(ctx, "GET", "/operator/v1/plans", nil, &ps); err != nil {
			return err
		}
		body := struct {
			Version uint64 `json:"version"`
			plan
		}{ps.Version, plan{RatePerMinute: m.RatePerMinute.ValueInt64(), Concurrency: m.Concurrency.ValueInt64(), Keys: m.Keys.ValueInt64(),
			MonthlyCap: m.MonthlyCap.ValueString(), MonthlyCredits: m.MonthlyCredits.ValueString()}}
		err = r.c.do(ctx, "PUT", "/operator/v1/plans/"+m.Name.ValueString(), body, nil)
		if !isStatus(err, http.StatusConflict) {
			return err
		}
	}
	return err
}

func (r *planResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m planModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.put(ctx, &m); err != nil {
		resp.Diagnostics.AddError("trawl_plan "+m.Name.ValueString(), err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *planResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m planModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var ps plans
	if err := r.c.do(ctx, "GET", "/operator/v1/plans", nil, &ps); err != nil {
		resp.Diagnostics.AddError("trawl_plan: read", err.Error())
		return
	}
	p, ok := ps.Plans[m.Name.ValueString()]
	if !ok {
		resp.State.RemoveResource(ctx)
		return
	}
	m.RatePerMinute, m.Concurrency, m.Keys = types.Int64Value(p.RatePerMinute), types.Int64Value(p.Concurrency), types.Int64Value(p.Keys)
	m.MonthlyCap, m.MonthlyCredits = types.StringValue(p.MonthlyCap), types.StringValue(p.MonthlyCredits)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *planResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m planModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.put(ctx, &m); err != nil {
		resp.Diagnostics.AddError("trawl_plan "+m.Name.ValueString(), err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *planResource) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {
	// The plans are fixed: the plan stays as it is.
}
