package provider

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// apiKeyResource is an API key of an account: created by the operator API
// (any role), revoked on destroy. The secret is known only from the
// create: it is kept in the state (sensitive).
type apiKeyResource struct{ c *client }

func newAPIKeyResource() resource.Resource { return &apiKeyResource{} }

type apiKeyModel struct {
	ID        types.String `tfsdk:"id"`
	Account   types.String `tfsdk:"account"`
	Name      types.String `tfsdk:"name"`
	Role      types.String `tfsdk:"role"`
	Prefix    types.String `tfsdk:"prefix"`
	Key       types.String `tfsdk:"key"`
	CreatedAt types.String `tfsdk:"created_at"`
}

func (r *apiKeyResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_api_key"
}

func (r *apiKeyResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		Description: "An API key of an account. Any change makes a new key; destroy revokes it (for good).",
		Attributes: map[string]schema.Attribute{
			"id":      schema.StringAttribute{Computed: true, PlanModifiers: keep, Description: "The key's id (key_…)."},
			"account": schema.StringAttribute{Required: true, PlanModifiers: replace, Description: "The account the key belongs to."},
			"name": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(""), PlanModifiers: replace,
				Description: "A label, at most 64 printable characters."},
			"role": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("user"), PlanModifiers: replace,
				Description: "user (default), auditor or operator."},
			"prefix":     schema.StringAttribute{Computed: true, PlanModifiers: keep, Description: "The key's first characters, for display."},
			"key":        schema.StringAttribute{Computed: true, Sensitive: true, PlanModifiers: keep, Description: "The secret; known only at creation."},
			"created_at": schema.StringAttribute{Computed: true, PlanModifiers: keep},
		},
	}
}

func (r *apiKeyResource) Configure(_ context.Context, req resource.ConfigureRequest, _ *resource.ConfigureResponse) {
	if c, ok := req.ProviderData.(*client); ok {
		r.c = c
	}
}

func keysPath(account string) string {
	return "/operator/v1/accounts/" + url.PathEscape(account) + "/keys"
}

func (r *apiKeyResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m apiKeyModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var k apiKey
	body := map[string]string{"name": m.Name.ValueString(), "role": m.Role.ValueString()}
	if err := r.c.do(ctx, "POST", keysPath(m.Account.ValueString()), body, &k); err != nil {
		resp.Diagnostics.AddError("trawl_api_key: create", err.Error())
		return
	}
	m.ID, m.Prefix, m.Key = types.StringValue(k.ID), types.StringValue(k.Prefix), types.StringValue(k.Key)
	m.Role = types.StringValue(k.Role)
	m.CreatedAt = types.StringValue(k.CreatedAt.UTC().Format(time.RFC3339))
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *apiKeyResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m apiKeyModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var l struct {
		Keys []apiKey `json:"keys"`
	}
	err := r.c.do(ctx, "GET", keysPath(m.Account.ValueString()), nil, &l)
	if isStatus(err, http.StatusNotFound) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("trawl_api_key: read", err.Error())
		return
	}
	for _, k := range l.Keys {
		if k.ID == m.ID.ValueString() {
			if k.Revoked { // revoked outside Terraform: gone
				resp.State.RemoveResource(ctx)
				return
			}
			m.Name, m.Role, m.Prefix = types.StringValue(k.Name), types.StringValue(k.Role), types.StringValue(k.Prefix)
			resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
			return
		}
	}
	resp.State.RemoveResource(ctx)
}

func (r *apiKeyResource) Update(_ context.Context, _ resource.UpdateRequest, resp *resource.UpdateResponse) {
	// Every argument forces a new key.
	resp.Diagnostics.AddError("trawl_api_key", "a key cannot be changed in place")
}

func (r *apiKeyResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m apiKeyModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	err := r.c.do(ctx, "DELETE", keysPath(m.Account.ValueString())+"/"+url.PathEscape(m.ID.ValueString()), nil, nil)
	if err != nil && !isStatus(err, http.StatusNotFound) {
		resp.Diagnostics.AddError("trawl_api_key: revoke", err.Error())
	}
}
