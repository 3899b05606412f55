package provider

import (
	"context"
	"net/http"
	"net/url"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// accountResource is a customer account made by an operator (an internal
// team, a partner). The ledger never deletes an account: destroy only
// stops managing it (revoke its keys with trawl_api_key).
type accountResource struct{ c *client }

func newAccountResource() resource.Resource { return &accountResource{} }

type accountModel struct {
	ID    types.String `tfsdk:"id"`
	Email types.String `tfsdk:"email"`
	Plan  types.String `tfsdk:"plan"`
}

type account struct {
	ID    string `json:"id"`
	Email string `json:"email"`
	Plan  string `json:"plan"`
}

func (r *accountResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_account"
}

func (r *accountResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Description: "An account, in every region. Accounts are never deleted: destroy stops managing it and changes nothing. email and plan are what it was created with (a top-up later moves it to supporter without a diff).",
		Attributes: map[string]schema.Attribute{
			"id":    schema.StringAttribute{Required: true, PlanModifiers: replace, Description: "1 to 64 of A-Z a-z 0-9 _ -."},
			"email": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(""), PlanModifiers: replace},
			"plan": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("free"), PlanModifiers: replace,
				Description: "free or supporter (a top-up makes an account supporter)."},
		},
	}
}

func (r *accountResource) Configure(_ context.Context, req resource.ConfigureRequest, _ *resource.ConfigureResponse) {
	if c, ok := req.ProviderData.(*client); ok {
		r.c = c
	}
}

func (r *accountResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m accountModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var a account
	body := account{ID: m.ID.ValueString(), Email: m.Email.ValueString(), Plan: m.Plan.ValueString()}
	if err := r.c.do(ctx, "POST", "/operator/v1/accounts", body, &a); err != nil {
		resp.Diagnostics.AddError("trawl_account "+body.ID, err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *accountResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m accountModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var a account
	err := r.c.do(ctx, "GET", "/operator/v1/accounts/"+url.PathEscape(m.ID.ValueString()), nil, &a)
	if isStatus(err, http.StatusNotFound) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("trawl_account: read", err.Error())
		return
	}
	// Email and plan stay as created here: a top-up moves an account to
	// the supporter plan, which is not a change to undo by replacing it.
	if m.Email.IsNull() || m.Email.IsUnknown() {
		m.Email = types.StringValue(a.Email)
	}
	if m.Plan.IsNull() || m.Plan.IsUnknown() {
		m.Plan = types.StringValue(a.Plan)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *accountResource) Update(_ context.Context, _ resource.UpdateRequest, resp *resource.UpdateResponse) {
	resp.Diagnostics.AddError("trawl_account", "an account cannot be changed in place")
}

func (r *accountResource) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {
	// Accounts are never deleted.
}

func (r *accountResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughID(ctx, path.Root("id"), req, resp)
}
