package provider

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// recipeResource is an operator recipe (docs/recipes.md) kept in the
// ledger: every region's cells load it, staged until two checks pass.
// Destroy removes it from every region.
type recipeResource struct{ c *client }

func newRecipeResource() resource.Resource { return &recipeResource{} }

type recipeModel struct {
	Name     types.String `tfsdk:"name"`
	Manifest types.String `tfsdk:"manifest"`
	Script   types.String `tfsdk:"script"`
	Module   types.String `tfsdk:"module"`
	Hash     types.String `tfsdk:"hash"`
	Index    types.Int64  `tfsdk:"index"`
}

// recipeBody is the operator API's (gate.RecipeBody).
type recipeBody struct {
	Name     string          `json:"name,omitempty"`
	Manifest json.RawMessage `json:"manifest"`
	Script   string          `json:"script,omitempty"`
	Module   []byte          `json:"module,omitempty"`
	Hash     string          `json:"hash,omitempty"`
	Index    uint64          `json:"index,omitempty"`
}

var errInvalidJSON = errors.New("not valid JSON")

func (r *recipeResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_recipe"
}

func (r *recipeResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "An operator recipe, kept in the ledger and loaded by every region's cells (staged until two health checks pass). Destroy removes it from every region.",
		Attributes: map[string]schema.Attribute{
			"name": schema.StringAttribute{Required: true, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Description: "The recipe's name: its manifest's name, 1 to 63 of [a-z0-9-]; not a built-in's."},
			"manifest": schema.StringAttribute{Required: true,
				Description: "recipe.json as a JSON string, e.g. jsonencode({...}) or file(\"recipe.json\"); a manifest that means the same is no change."},
			"script": schema.StringAttribute{Optional: true, Description: "A script recipe's script.js source."},
			"module": schema.StringAttribute{Optional: true, Description: "A module recipe's module.wasm, base64 (filebase64(\"module.wasm\"))."},
			"hash":   schema.StringAttribute{Computed: true, Description: "The hash the cells know the recipe by."},
			"index":  schema.Int64Attribute{Computed: true, Description: "The ledger index of the change that wrote it."},
		},
	}
}

func (r *recipeResource) Configure(_ context.Context, req resource.ConfigureRequest, _ *resource.ConfigureResponse) {
	if c, ok := req.ProviderData.(*client); ok {
		r.c = c
	}
}

func (r *recipeResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughID(ctx, path.Root("name"), req, resp)
}

func (r *recipeResource) put(ctx context.Context, m *recipeModel) (string, error) {
	body := recipeBody{Manifest: json.RawMessage(m.Manifest.ValueString()), Script: m.Script.ValueString()}
	if mod := m.Module.ValueString(); mod != "" {
		b, err := base64.StdEncoding.DecodeString(mod)
		if err != nil {
			return "module: not base64 (use filebase64)", err
		}
		body.Module = b
	}
	if !json.Valid(body.Manifest) {
		return "manifest", errInvalidJSON
	}
	var out recipeBody
	if err := r.c.do(ctx, http.MethodPut, "/operator/v1/recipes/"+url.PathEscape(m.Name.ValueString()), body, &out); err != nil {
		return "put", err
	}
	m.Hash, m.Index = types.StringValue(out.Hash), types.Int64Value(int64(out.Index))
	return "", nil
}

func (r *recipeResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	r.apply(ctx, req.Plan, &resp.State, &resp.Diagnostics)
}

// apply puts the planned recipe (create and update are the same PUT).
func (r *recipeResource) apply(ctx context.Context, plan tfsdk.Plan, state *tfsdk.State, diags *diag.Diagnostics) {
	var m recipeModel
	diags.Append(plan.Get(ctx, &m)...)
	if diags.HasError() {
		return
	}
	if what, err := r.put(ctx, &m); err != nil {
		diags.AddError("trawl_recipe "+m.Name.ValueString()+": "+what, err.Error())
		return
	}
	diags.Append(state.Set(ctx, &m)...)
}

func (r *recipeResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m recipeModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var out recipeBody
	err := r.c.do(ctx, http.MethodGet, "/operator/v1/recipes/"+url.PathEscape(m.Name.ValueString()), nil, &out)
	if isStatus(err, http.StatusNotFound) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("trawl_recipe: read", err.Error())
		return
	}
	// The configuration's spelling of a manifest that means the same is
	// kept: only a change of meaning is a difference.
	if !sameJSON(m.Manifest.ValueString(), out.Manifest) {
		m.Manifest = types.StringValue(string(out.Manifest))
	}
	m.Script = optionalString(m.Script, out.Script)
	mod := ""
	if len(out.Module) > 0 {
		mod = base64.StdEncoding.EncodeToString(out.Module)
	}
	m.Module = optionalString(m.Module, mod)
	m.Hash, m.Index = types.StringValue(out.Hash), types.Int64Value(int64(out.Index))
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *recipeResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	r.apply(ctx, req.Plan, &resp.State, &resp.Diagnostics)
}

func (r *recipeResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m recipeModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	err := r.c.do(ctx, http.MethodDelete, "/operator/v1/recipes/"+url.PathEscape(m.Name.ValueString()), nil, nil)
	if err != nil && !isStatus(err, http.StatusNotFound) {
		resp.Diagnostics.AddError("trawl_recipe: delete", err.Error())
	}
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a string, b []byte) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// optionalString is v for an optional attribute: null stays null while
// the API has nothing.
func optionalString(cur types.String, v string) types.String {
	if v == "" && cur.IsNull() {
		return cur
	}
	return types.StringValue(v)
}
