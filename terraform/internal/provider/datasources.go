package provider

import (
	"context"
	"encoding/json"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// cellsDataSource lists the gate's region's cells.
type cellsDataSource struct{ c *client }

func newCellsDataSource() datasource.DataSource { return &cellsDataSource{} }

type cellsModel struct {
	Region types.String    `tfsdk:"region"`
	Cells  []cellItemModel `tfsdk:"cells"`
}

type cellItemModel struct {
	Name    types.String `tfsdk:"name"`
	API     types.String `tfsdk:"api"`
	Live    types.Bool   `tfsdk:"live"`
	Drained types.Bool   `tfsdk:"drained"`
}

func (d *cellsDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_cells"
}

func (d *cellsDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "The cells of the gate's region: live ones and ones it knew that are down.",
		Attributes: map[string]schema.Attribute{
			"region": schema.StringAttribute{Computed: true},
			"cells": schema.ListNestedAttribute{Computed: true, NestedObject: schema.NestedAttributeObject{
				Attributes: map[string]schema.Attribute{
					"name":    schema.StringAttribute{Computed: true},
					"api":     schema.StringAttribute{Computed: true},
					"live":    schema.BoolAttribute{Computed: true},
					"drained": schema.BoolAttribute{Computed: true},
				},
			}},
		},
	}
}

func (d *cellsDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, _ *datasource.ConfigureResponse) {
	if c, ok := req.ProviderData.(*client); ok {
		d.c = c
	}
}

func (d *cellsDataSource) Read(ctx context.Context, _ datasource.ReadRequest, resp *datasource.ReadResponse) {
	var l cellList
	if err := d.c.do(ctx, "GET", "/operator/v1/cells", nil, &l); err != nil {
		resp.Diagnostics.AddError("trawl_cells", err.Error())
		return
	}
	m := cellsModel{Region: types.StringValue(l.Region), Cells: []cellItemModel{}}
	for _, c := range l.Cells {
		m.Cells = append(m.Cells, cellItemModel{Name: types.StringValue(c.Name), API: types.StringValue(c.API),
			Live: types.BoolValue(c.Live), Drained: types.BoolValue(c.Drained)})
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// pricesDataSource is the price table in force.
type pricesDataSource struct{ c *client }

func newPricesDataSource() datasource.DataSource { return &pricesDataSource{} }

type pricesModel struct {
	Version types.Int64  `tfsdk:"version"`
	Table   types.String `tfsdk:"table_json"`
}

func (d *pricesDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_prices"
}

func (d *pricesDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "The price table in force (GET /v1/prices' shape) and its ledger version (0: never changed through the ledger).",
		Attributes: map[string]schema.Attribute{
			"version":    schema.Int64Attribute{Computed: true},
			"table_json": schema.StringAttribute{Computed: true, Description: "The table as JSON: jsondecode() it."},
		},
	}
}

func (d *pricesDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, _ *datasource.ConfigureResponse) {
	if c, ok := req.ProviderData.(*client); ok {
		d.c = c
	}
}

func (d *pricesDataSource) Read(ctx context.Context, _ datasource.ReadRequest, resp *datasource.ReadResponse) {
	var pt priceTable
	if err := d.c.do(ctx, "GET", "/operator/v1/prices", nil, &pt); err != nil {
		resp.Diagnostics.AddError("trawl_prices", err.Error())
		return
	}
	b, err := json.Marshal(pt.Table)
	if err != nil {
		resp.Diagnostics.AddError("trawl_prices", err.Error())
		return
	}
	m := pricesModel{Version: types.Int64Value(int64(pt.Version)), Table: types.StringValue(string(b))}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
