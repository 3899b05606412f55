package provider

import (
	"context"
	"fmt"
	"net/http"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// cellResource manages one cell of the gate's region: whether it is
// drained, and (remove_on_destroy) forgetting it when it is down for good.
// It does not start or stop cells: machines do (docs/terraform.md).
type cellResource struct{ c *client }

func newCellResource() resource.Resource { return &cellResource{} }

type cellModel struct {
	Name            types.String `tfsdk:"name"`
	Drained         types.Bool   `tfsdk:"drained"`
	RemoveOnDestroy types.Bool   `tfsdk:"remove_on_destroy"`
	Live            types.Bool   `tfsdk:"live"`
	API             types.String `tfsdk:"api"`
}

func (r *cellResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_cell"
}

func (r *cellResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A cell of the gate's region, which must have joined it once. drained = true sends it no new work (its own jobs and monitors stay with it). Destroying the resource undrains the cell, or with remove_on_destroy makes the region forget it (the cell must be down: its ids then answer 404).",
		Attributes: map[string]schema.Attribute{
			"name": schema.StringAttribute{Required: true, Description: "The cell's --name.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
			"drained": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				Description: "Send the cell no new work (default true)."},
			"remove_on_destroy": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				Description: "On destroy, remove the cell from the region instead of undraining it."},
			"live": schema.BoolAttribute{Computed: true, Description: "A member of the region when last read."},
			"api":  schema.StringAttribute{Computed: true, Description: "The cell's address as membership saw it last."},
		},
	}
}

func (r *cellResource) Configure(_ context.Context, req resource.ConfigureRequest, _ *resource.ConfigureResponse) {
	if c, ok := req.ProviderData.(*client); ok {
		r.c = c
	}
}

func (r *cellResource) find(ctx context.Context, name string) (*cellInfo, error) {
	var l cellList
	if err := r.c.do(ctx, "GET", "/operator/v1/cells", nil, &l); err != nil {
		return nil, err
	}
	for _, c := range l.Cells {
		if c.Name == name {
			return &c, nil
		}
	}
	return nil, nil
}

func (r *cellResource) setDrain(ctx context.Context, name string, on bool) (*cellInfo, error) {
	method := "DELETE"
	if on {
		method = "POST"
	}
	var ci cellInfo
	if err := r.c.do(ctx, method, "/operator/v1/cells/"+name+"/drain", nil, &ci); err != nil {
		return nil, err
	}
	return &ci, nil
}

func fill(m *cellModel, ci *cellInfo) {
	m.Drained = types.BoolValue(ci.Drained)
	m.Live = types.BoolValue(ci.Live)
	m.API = types.StringValue(ci.API)
}

func (r *cellResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m cellModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ci, err := r.setDrain(ctx, m.Name.ValueString(), m.Drained.ValueBool())
	if err != nil {
		resp.Diagnostics.AddError("trawl_cell "+m.Name.ValueString(), err.Error())
		return
	}
	fill(&m, ci)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *cellResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m cellModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ci, err := r.find(ctx, m.Name.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("trawl_cell "+m.Name.ValueString(), err.Error())
		return
	}
	if ci == nil { // removed from the region
		resp.State.RemoveResource(ctx)
		return
	}
	fill(&m, ci)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *cellResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m cellModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ci, err := r.setDrain(ctx, m.Name.ValueString(), m.Drained.ValueBool())
	if err != nil {
		resp.Diagnostics.AddError("trawl_cell "+m.Name.ValueString(), err.Error())
		return
	}
	fill(&m, ci)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *cellResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m cellModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := m.Name.ValueString()
	var err error
	if m.RemoveOnDestroy.ValueBool() {
		err = r.c.do(ctx, "DELETE", "/operator/v1/cells/"+name, nil, nil)
	} else {
		_, err = r.setDrain(ctx, name, false)
	}
	if err != nil && !isStatus(err, http.StatusNotFound) {
		resp.Diagnostics.AddError(fmt.Sprintf("trawl_cell %s: destroy", name), err.Error())
	}
}

func (r *cellResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughID(ctx, path.Root("name"), req, resp)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("remove_on_destroy"), false)...)
}
